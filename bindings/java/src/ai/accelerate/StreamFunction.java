package ai.accelerate;

/** An iterable dataset: start(epoch) restarts the stream, next() gives the next sample's fields
 *  (closed by the dataset) or null at the end. An exception becomes the loader's AccelerateIOException. */
@FunctionalInterface
public interface StreamFunction {
  Tensor[] next() throws Exception;

  default void start(long epoch) throws Exception {}
}

package ai.accelerate;

/** Sample {@code index} of a map-style dataset: its fields. The dataset closes the returned tensors.
 *  May run on the loader's background threads. An exception becomes the loader's AccelerateIOException. */
@FunctionalInterface
public interface SampleFunction {
  Tensor[] apply(long index) throws Exception;
}

package ai.accelerate;

/** A training run for Accelerate.findExecutableBatchSize: trains with batchSize, and throws the
 *  library's OutOfMemoryException when the batch does not fit. */
@FunctionalInterface
public interface BatchSizeFunction {
  void run(long batchSize) throws Exception;
}

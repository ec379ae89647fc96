package ai.accelerate;

import java.util.List;

/** Makes a batch from samples (each an array of fields, closed after the call); the loader closes
 *  the returned tensors. An exception becomes the loader's AccelerateIOException. */
@FunctionalInterface
public interface CollateFunction {
  Tensor[] apply(List<Tensor[]> samples) throws Exception;
}

package ai.accelerate;

/** A user learning-rate schedule (PyTorch's LambdaLR): lr = base_lr * factor(step). An exception
 *  fails the step with its message (AccelerateIOException) and leaves the rates as they were. */
@FunctionalInterface
public interface LrLambdaFunction {
  double factor(long step) throws Exception;
}

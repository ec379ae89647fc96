package ai.accelerate;

/** Host or device memory is exhausted (recoverable: e.g. lower the batch size). */
public class OutOfMemoryException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public OutOfMemoryException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.OUT_OF_MEMORY;
  }
}

package ai.accelerate;

/** A bad value: null, wrong shape or dtype, unknown option key. */
public class InvalidArgumentException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public InvalidArgumentException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.INVALID_ARGUMENT;
  }
}

package ai.accelerate;

/** A closed or foreign object was used. */
public class InvalidHandleException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public InvalidHandleException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.INVALID_HANDLE;
  }
}

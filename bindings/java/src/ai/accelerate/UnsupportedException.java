package ai.accelerate;

/** The feature is not built in or not available on this machine. */
public class UnsupportedException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public UnsupportedException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.UNSUPPORTED;
  }
}

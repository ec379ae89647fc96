package ai.accelerate;

/** The binding and the library were built for different ABI versions. */
public class VersionMismatchException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public VersionMismatchException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.VERSION_MISMATCH;
  }
}

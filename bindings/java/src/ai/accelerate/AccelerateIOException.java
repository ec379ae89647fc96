package ai.accelerate;

/** A file could not be read or written, or a host callback failed. */
public class AccelerateIOException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public AccelerateIOException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.IO;
  }
}

package ai.accelerate;

/** A failed call into accelerate: the library's status and message. Subclasses name the status. */
public class AccelerateException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public AccelerateException(String message) {
    super(message);
  }

  /** The acc_status this exception stands for. */
  public Status status() {
    return Status.INTERNAL;
  }
}

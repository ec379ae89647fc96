package ai.accelerate;

/** A collective or rendezvous did not finish in time. */
public class AccelerateTimeoutException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public AccelerateTimeoutException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.TIMEOUT;
  }
}

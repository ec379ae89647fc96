package ai.accelerate;

/** A peer process failed; the job can be restarted. */
public class AbortedException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public AbortedException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.ABORTED;
  }
}

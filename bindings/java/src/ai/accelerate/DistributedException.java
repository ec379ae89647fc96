package ai.accelerate;

/** Another error of the process group. */
public class DistributedException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public DistributedException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.DISTRIBUTED;
  }
}

package ai.accelerate;

/** A precondition is not met (e.g. a step before backward). */
public class NotInitializedException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public NotInitializedException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.NOT_INITIALIZED;
  }
}

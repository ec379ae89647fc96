package ai.accelerate;

/** A bug in accelerate; Accelerate.lastErrorBacktrace() has the C++ backtrace. */
public class InternalException extends AccelerateException {
  private static final long serialVersionUID = 1L;

  public InternalException(String message) {
    super(message);
  }

  @Override
  public Status status() {
    return Status.INTERNAL;
  }
}

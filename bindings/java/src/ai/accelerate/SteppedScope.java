package ai.accelerate;

/** A try-with-resources scope with a step: step() runs the scope's step; close() ends it once
 *  (closing again does nothing). The base of LocalSgd and Profile. */
public abstract class SteppedScope implements AutoCloseable {
  private final Runnable step;
  private Runnable end;

  SteppedScope(Runnable step, Runnable end) {
    this.step = step;
    this.end = end;
  }

  public void step() {
    step.run();
  }

  @Override
  public void close() {
    Runnable e = end;
    if (e == null) return;
    e.run();  // an end that failed (on another thread than its begin) is tried again by the next close
    end = null;
  }
}

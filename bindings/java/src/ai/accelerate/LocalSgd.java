package ai.accelerate;

/** Accelerate's LocalSGD scope (Accelerator.localSgd) for try-with-resources: step() after each
 *  optimizer step averages the parameters every localSgdSteps steps; close() averages them once
 *  more and ends the scope (closing again does nothing). */
public final class LocalSgd implements AutoCloseable {
  private final Runnable step;
  private Runnable end;

  LocalSgd(Runnable step, Runnable end) {
    this.step = step;
    this.end = end;
  }

  public void step() {
    step.run();
  }

  @Override
  public void close() {
    Runnable e = end;
    end = null;
    if (e != null) e.run();
  }
}

package ai.accelerate;

/** Accelerate's LocalSGD scope (Accelerator.localSgd) for try-with-resources: step() after each
 *  optimizer step averages the parameters every localSgdSteps steps; close() averages them once
 *  more and ends the scope (closing again does nothing). */
public final class LocalSgd extends SteppedScope {
  LocalSgd(Runnable step, Runnable end) {
    super(step, end);
  }
}

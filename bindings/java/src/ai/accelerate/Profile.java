package ai.accelerate;

/** Accelerate's profile() scope (Accelerator.profile) for try-with-resources: step() is the
 *  profiler's step for its schedule; close() stops the profiler, writes the Chrome trace when
 *  output_trace_dir is set and waits for every process (closing again does nothing). */
public final class Profile extends SteppedScope {
  Profile(Runnable step, Runnable end) {
    super(step, end);
  }
}

// Accelerate's profile() scope (Accelerator.Profile) for `using`: Step() is the profiler's step for
// its schedule; Dispose stops the profiler, writes the Chrome trace when output_trace_dir is set and
// waits for every process (disposing again does nothing).
using System;

namespace Accelerate {

public sealed class Profile : SteppedScope {
  internal Profile(Action step, Action end) : base(step, end) {}
}

}

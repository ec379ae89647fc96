// Accelerate's LocalSGD scope (Accelerator.LocalSgd) for `using`: Step() after each optimizer step
// averages the parameters every localSgdSteps steps; Dispose averages them once more and ends the
// scope (disposing again does nothing).
using System;

namespace Accelerate {

public sealed class LocalSgd : SteppedScope {
  internal LocalSgd(Action step, Action end) : base(step, end) {}
}

}

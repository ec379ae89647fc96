// Accelerate's LocalSGD scope (Accelerator.LocalSgd) for `using`: Step() after each optimizer step
// averages the parameters every localSgdSteps steps; Dispose averages them once more and ends the
// scope (disposing again does nothing).
using System;

namespace Accelerate {

public sealed class LocalSgd : IDisposable {
  readonly Action step;
  Action end;

  internal LocalSgd(Action step, Action end) {
    this.step = step;
    this.end = end;
  }

  public void Step() { step(); }

  public void Dispose() {
    Action e = end;
    end = null;
    if (e != null) e();
  }
}

}

// A `using` scope with a step: Step() runs the scope's step; Dispose ends it once (disposing again
// does nothing). The base of LocalSgd and Profile.
using System;

namespace Accelerate {

public abstract class SteppedScope : IDisposable {
  readonly Action step;
  Action end;

  internal SteppedScope(Action step, Action end) {
    this.step = step;
    this.end = end;
  }

  public void Step() { step(); }

  public void Dispose() {
    Action e = end;
    if (e == null) return;
    e();  // an end that failed (on another thread than its begin) is tried again by the next Dispose
    end = null;
  }
}

}

// A scoped section (Accumulate, NoSync, MainProcessFirst) for `using`: Dispose ends it once;
// disposing again does nothing (after a Dispose that failed, it tries again).
using System;

namespace Accelerate {

public sealed class Scope : IDisposable {
  Action end;

  internal Scope(Action end) { this.end = end; }

  public void Dispose() {
    Action e = end;
    if (e == null) return;
    e();  // an end that failed (on another thread than its begin) is tried again by the next Dispose
    end = null;
  }
}

}

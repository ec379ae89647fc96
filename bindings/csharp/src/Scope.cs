// A scoped section (Accumulate, NoSync, MainProcessFirst) for `using`: Dispose ends it once;
// disposing again does nothing.
using System;

namespace Accelerate {

public sealed class Scope : IDisposable {
  Action end;

  internal Scope(Action end) { this.end = end; }

  public void Dispose() {
    Action e = end;
    end = null;
    if (e != null) e();
  }
}

}

// Native objects held by one owner (a tensor scope, a batch for the tensors taken from it, a pass
// over a loader for its current batch), disposed together. An object has at most one owner;
// disposing it on its own, or Keep(), takes it out.
using System;
using System.Collections.Generic;

namespace Accelerate {

public class Owner {
  readonly HashSet<IDisposable> items = new HashSet<IDisposable>();  // proxies compare by reference

  internal Owner() {}

  internal void Add(IDisposable item) {
    lock (items) items.Add(item);
  }

  internal void Remove(IDisposable item) {
    lock (items) items.Remove(item);
  }

  internal int Count {
    get { lock (items) return items.Count; }
  }

  /// Disposes every object held; the first failure is rethrown after all were tried.
  internal void DisposeAll() {
    IDisposable[] held;
    lock (items) {
      held = new IDisposable[items.Count];
      items.CopyTo(held);
      items.Clear();
    }
    Exception first = null;
    foreach (IDisposable item in held) {
      try {
        item.Dispose();
      } catch (Exception e) {
        if (first == null) first = e;
      }
    }
    if (first != null) throw first;
  }
}

}

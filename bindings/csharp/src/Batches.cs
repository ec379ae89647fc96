// One pass over a data loader's epoch, which owns the batch it handed out last.
using System;
using System.Collections;
using System.Collections.Generic;

namespace Accelerate {

/// <summary>One pass over a data loader's epoch. It owns the batch it handed out last: that batch,
/// and every tensor taken from it with Get/Find, is disposed when the loop moves to the next one and
/// when the epoch ends, so a loop need not dispose them; <c>batch.Keep()</c> takes a batch out (its
/// caller then disposes it). <c>foreach</c> over a DataLoader runs on one of these and disposes it
/// when the loop ends, by break or exception too: an unfinished epoch then ends, as a dropped Python
/// iterator's does.</summary>
public sealed class Batches : IEnumerable<TensorList>, IEnumerator<TensorList> {
  readonly DataLoader loader;
  readonly Owner current = new Owner();
  TensorList batch;
  bool done;
  volatile bool disposed;
  volatile bool superseded;   // disposed by a newer pass of its loader, not by its caller
  volatile bool loaderDisposed;  // disposed with its loader (on another thread, maybe, mid-loop)
  long epoch = -1;   // the loader's epoch this pass runs in, from its first batch on

  internal Batches(DataLoader loader) { this.loader = loader; }

  /// <summary>This pass itself.</summary>
  public IEnumerator<TensorList> GetEnumerator() { return this; }
  IEnumerator IEnumerable.GetEnumerator() { return this; }

  /// <summary>The batch handed out last.</summary>
  public TensorList Current { get { return batch; } }
  object IEnumerator.Current { get { return batch; } }

  /// <summary>Releases the previous batch (unless kept), then fetches the next; false at the end of
  /// the epoch.</summary>
  public bool MoveNext() {
    if (disposed) return DisposedUnderTheLoop();
    if (done) return false;
    batch = null;
    current.DisposeAll();
    // An epoch ended under this pass (by another pass over the same native loader) would be followed
    // silently by the next one: a nested loop would never end.
    if (epoch < 0) {
      epoch = loader.Epoch;
    } else if (loader.Epoch != epoch || !loader.InEpoch) {
      throw EndedElsewhere();
    }
    batch = loader.NextBatch();
    if (batch == null) {
      done = true;
      return false;
    }
    batch.swigEntries = new Owner();
    batch.MoveTo(current);
    if (disposed) {  // disposed on another thread while Next ran: the batch goes with the pass
      current.DisposeAll();
      batch = null;
      return DisposedUnderTheLoop();
    }
    return true;
  }

  /// <summary>A pass cannot restart: ask the loader for a new one.</summary>
  public void Reset() { throw new NotSupportedException("ask the DataLoader for a new pass"); }

  // What a disposed pass answers: no more batches, or, where it was disposed before its epoch's end
  // by a newer pass or with its loader, why not.
  bool DisposedUnderTheLoop() {
    if (superseded && !done) throw EndedElsewhere();
    if (loaderDisposed && !done) throw new AccelerateInvalidHandleException("the data loader was disposed during this loop");
    return false;
  }

  static InvalidOperationException EndedElsewhere() {
    return new InvalidOperationException("this pass over the data loader was ended by another pass over it (a loop "
        + "over the same loader inside this one, or on another thread) before its epoch ended; loops over one loader "
        + "cannot nest");
  }

  // Disposed because a newer pass of the loader starts: a later MoveNext throws instead of ending quietly.
  internal void Supersede() {
    superseded = true;
    Dispose();
  }

  /// <summary>Releases the batch handed out last (unless kept) and, if the epoch is unfinished,
  /// ends it (DataLoader.EndEpoch; not when the loader itself is being disposed: freeing it ends its
  /// epoch). Disposing again does nothing.</summary>
  public void Dispose() {
    if (disposed) return;
    loaderDisposed = loader.IsDisposed;  // before disposed: a loop on another thread reads them in that order
    disposed = true;
    batch = null;
    try {
      current.DisposeAll();
    } finally {
      if (!done && !loaderDisposed) loader.EndEpoch();
    }
  }
}

}

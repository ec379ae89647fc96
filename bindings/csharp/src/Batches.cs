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
  bool done, disposed;

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
    if (disposed || done) return false;
    batch = null;
    current.DisposeAll();
    batch = loader.Next();
    if (batch == null) {
      done = true;
      return false;
    }
    batch.swigEntries = new Owner();
    batch.MoveTo(current);
    return true;
  }

  /// <summary>A pass cannot restart: ask the loader for a new one.</summary>
  public void Reset() { throw new NotSupportedException("ask the DataLoader for a new pass"); }

  /// <summary>Releases the batch handed out last (unless kept) and, if the epoch is unfinished,
  /// ends it (DataLoader.EndEpoch). Disposing again does nothing.</summary>
  public void Dispose() {
    if (disposed) return;
    disposed = true;
    batch = null;
    try {
      current.DisposeAll();
    } finally {
      if (!done && !loader.IsDisposed) loader.EndEpoch();
    }
  }
}

}

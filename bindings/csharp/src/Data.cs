// Datasets from C# delegates, custom collation, and data loaders as IEnumerable<TensorList>.
using System;
using System.Collections;
using System.Collections.Generic;

namespace Accelerate {

public partial class Dataset {
  /// A map-style dataset of `size` samples: `sample(i)` returns sample i's fields, which the dataset
  /// disposes. It may run on loader threads; an exception fails the loader's call (AccelerateIOException).
  public static Dataset FromCallback(long size, Func<long, Tensor[]> sample) {
    if (sample == null) throw new ArgumentNullException("sample");
    return FromSampleSource(size, new SampleAdapter(sample));
  }
  /// An iterable dataset: `next()` gives the next sample's fields or null at the end; `start(epoch)`
  /// (may be null) restarts the stream. sizeHint -1 when unknown.
  public static Dataset FromIterator(Func<Tensor[]> next, Action<long> start = null, long sizeHint = -1) {
    if (next == null) throw new ArgumentNullException("next");
    return FromStreamSource(new StreamAdapter(next, start), sizeHint);
  }
}

public partial class DataLoader : IEnumerable<TensorList> {
  /// A loader over a batch sampler's batches (Accelerate's batch_sampler): batch k holds the dataset
  /// indices batches[k], yielded in this order every epoch; sizes may vary. opts may be null;
  /// batch_size, shuffle and drop_last are refused (the batches decide them).
  public static DataLoader FromBatches(Dataset ds, IEnumerable<long[]> batches, Options opts = null) {
    if (batches == null) throw new ArgumentNullException("batches");
    var indices = new List<long>();
    var sizes = new List<long>();
    foreach (long[] batch in batches) {
      if (batch == null) throw new ArgumentNullException("batches", "batch " + sizes.Count + " is null");
      indices.AddRange(batch);
      sizes.Add(batch.Length);
    }
    long[] flat = indices.ToArray(), counts = sizes.ToArray();
    return FromBatchArrays(ds, flat, flat.Length, counts, counts.Length, opts);
  }

  /// Batches are made by `collate` from the samples (each an array of fields, disposed after the
  /// call) instead of by stacking; the loader disposes the returned tensors.
  public void SetCollate(Func<IList<Tensor[]>, Tensor[]> collate) {
    if (collate == null) throw new ArgumentNullException("collate");
    SetCollator(new CollateAdapter(collate));
  }

  /// The next batch of the epoch (the caller disposes it), or null at its end; the first call starts
  /// an epoch.
  public TensorList Next() {
    UnfinishedEpochsAtExit.Track(this);
    return NextBatch();
  }

  // At the process's exit: an epoch still under way ends, which stops its worker threads (Mono waits
  // for the threads that ran a C# dataset function before it ends the process).
  internal void EndUnfinishedEpoch() {
    Accelerate.Batches pass;
    lock (this) pass = currentPass;
    if (pass != null) pass.Dispose();
    if (!IsDisposed && InEpoch) EndEpoch();
  }

  /// <summary>A pass over an epoch, which owns the batch it handed out last (see Batches). An earlier
  /// pass of this loader is disposed first, and an epoch left unfinished (Next() called by hand) is
  /// ended, so every pass starts at an epoch's beginning (or where LoadState or SkipFirstBatches put
  /// it). Disposing the loader disposes its pass. A pass is the epoch's iterator: making one takes what
  /// Python's iter(loader) takes (Iter()), so passes read in step (LINQ's Zip) draw as zip.</summary>
  public Batches Batches() {
    // The epoch ends first: refused (from inside the loader's own function), the running pass goes on
    // unharmed.
    EndEpoch();
    UnfinishedEpochsAtExit.Track(this);
    var pass = new Batches(this);
    var holder = new Owner();
    holder.Add(pass);
    Owner previous;
    Accelerate.Batches previousPass;
    lock (this) {
      previous = swigEntries;
      swigEntries = holder;
      previousPass = currentPass;
      currentPass = pass;
    }
    if (previousPass != null) previousPass.Supersede();
    if (previous != null) previous.DisposeAll();
    // Python's iter(loader): the pass is the iterator (two passes read in step draw as zip's).
    Iter();
    return pass;
  }
  Accelerate.Batches currentPass;

  /// <summary>The batches of an epoch: <c>foreach (TensorList batch in loader)</c> runs on Batches().</summary>
  public IEnumerator<TensorList> GetEnumerator() { return Batches(); }
  IEnumerator IEnumerable.GetEnumerator() { return Batches(); }
}

// The loaders that started an epoch, weakly held: when the process exits, each one's unfinished epoch
// ends. Mono, unlike .NET, waits at exit for the native threads it attached when they ran a C#
// delegate, and a loader's workers wait for the rest of their epoch: without this, a loop left
// mid-epoch (an enumerator neither finished nor disposed) keeps the process from ending.
static class UnfinishedEpochsAtExit {
  static readonly List<WeakReference> loaders = new List<WeakReference>();
  static bool hooked;

  internal static void Track(DataLoader loader) {
    lock (loaders) {
      if (!hooked) {
        AppDomain.CurrentDomain.ProcessExit += (sender, e) => EndAll();
        hooked = true;
      }
      loaders.RemoveAll(w => !w.IsAlive);
      if (!loaders.Exists(w => ReferenceEquals(w.Target, loader))) loaders.Add(new WeakReference(loader));
    }
  }

  static void EndAll() {
    List<WeakReference> all;
    lock (loaders) all = new List<WeakReference>(loaders);
    foreach (WeakReference w in all) {
      var loader = w.Target as DataLoader;
      if (loader == null) continue;
      try {
        loader.EndUnfinishedEpoch();
      } catch (Exception) {
        // the process is ending: a loader that cannot end its epoch is left to it
      }
    }
  }
}

}

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

  /// The batches of the current epoch; each batch is the caller's to dispose.
  public IEnumerator<TensorList> GetEnumerator() {
    for (TensorList batch = Next(); batch != null; batch = Next()) yield return batch;
  }
  IEnumerator IEnumerable.GetEnumerator() { return GetEnumerator(); }
}

}

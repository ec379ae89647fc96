// DataLoader.FromBatches: a batch sampler's batches of varying sizes, in their order, every epoch;
// what the C API refuses arrives as AccelerateInvalidArgumentException with its message.
using System;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class BatchSamplerTests {
  // The dataset's one field is the sample's own index, so a batch shows which samples it holds.
  static Dataset Counting(int n) {
    var ids = new long[n];
    for (int i = 0; i < n; ++i) ids[i] = i;
    using (Tensor t = Tensor.Of(ids, n))
    using (TensorList fields = TensorList.Of(t)) return Dataset.FromTensors(fields);
  }

  static List<long[]> Epoch(DataLoader loader) {
    var out_ = new List<long[]>();
    foreach (TensorList batch in loader)
      using (batch)
      using (Tensor ids = batch.Get(0)) out_.Add(ids.ToLongArray());
    return out_;
  }

  [Test]
  public void BatchesOfVaryingSizesInTheirOrderEveryEpoch() {
    var batches = new long[][] {new long[] {9}, new long[] {0, 1, 5}, new long[] {2, 3, 4}};
    using (Dataset ds = Counting(10))
    using (DataLoader loader = DataLoader.FromBatches(ds, batches)) {
      Assert.AreEqual(3, loader.Length);
      for (int epoch = 0; epoch < 2; ++epoch) Assert.AreEqual(batches, Epoch(loader).ToArray());
    }
    // A List, with loader options that do apply.
    using (Dataset ds = Counting(10))
    using (Options o = Options.DataLoader().Put("num_workers", 0))
    using (DataLoader loader = DataLoader.FromBatches(ds, new List<long[]> {new long[] {7, 8}, new long[] {6}}, o))
      Assert.AreEqual(new long[][] {new long[] {7, 8}, new long[] {6}}, Epoch(loader).ToArray());
  }

  [Test]
  public void RefusedBatchesAndOptionsRaiseWithTheLibrarysMessage() {
    using (Dataset ds = Counting(10)) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => DataLoader.FromBatches(ds, new long[][] {new long[] {3, 10}}));
      StringAssert.Contains("index 10, outside the dataset of 10", e.Message);
      e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => DataLoader.FromBatches(ds, new long[][] {new long[] {1, 2}, new long[0]}));
      StringAssert.Contains("batch 1 of the batch sampler is empty", e.Message);
      e = Assert.Throws<AccelerateInvalidArgumentException>(() => DataLoader.FromBatches(ds, new long[0][]));
      StringAssert.Contains("num_batches", e.Message);
      using (Options o = Options.DataLoader().Put("shuffle", true)) {
        e = Assert.Throws<AccelerateInvalidArgumentException>(
            () => DataLoader.FromBatches(ds, new long[][] {new long[] {1}}, o));
        StringAssert.Contains("'shuffle' does not apply", e.Message);
      }
      Assert.Throws<ArgumentNullException>(() => DataLoader.FromBatches(ds, new long[][] {new long[] {1}, null}));
    }
  }

  // Two shuffling loaders read in step after SetSeed: how each pass starts is what differs.
  enum Start { LinqZip, IterByHand, AtFirstBatch }

  static List<long>[] InStep(Start start) {
    Library.SetSeed(1234);
    var orders = new[] {new List<long>(), new List<long>()};
    using (Dataset ds = Counting(24))
    using (Options o = Options.DataLoader().Put("batch_size", 6).Put("shuffle", true))
    using (DataLoader first = new DataLoader(ds, o))
    using (DataLoader second = new DataLoader(ds, o)) {
      if (start == Start.LinqZip) {
        foreach (var pair in first.Zip(second, (a, b) => new[] {Ids(a), Ids(b)})) {
          orders[0].AddRange(pair[0]);
          orders[1].AddRange(pair[1]);
        }
        return orders;
      }
      if (start == Start.IterByHand) {
        first.Iter();
        second.Iter();
      }
      for (int batch = 0; batch < 4; ++batch) {
        using (TensorList a = first.Next()) orders[0].AddRange(Ids(a));
        using (TensorList b = second.Next()) orders[1].AddRange(Ids(b));
      }
    }
    return orders;
  }

  static long[] Ids(TensorList batch) {
    using (Tensor ids = batch.Get(0)) return ids.ToLongArray();
  }

  [Test]
  public void LoadersZippedDrawAsPythonsZip() {
    // Zip asks both for their enumerator (a pass: Python's iterator) before either's first batch, so
    // both take their iterator's draw first, as Iter() by hand does (held to PyTorch's zip(dl0, dl1)
    // in the C API's tests).
    var zipped = InStep(Start.IterByHand);
    Assert.AreEqual(zipped, InStep(Start.LinqZip));
    Assert.AreNotEqual(zipped[0], InStep(Start.AtFirstBatch)[0]);  // its sampler drew after the second's base seed
  }
}

}

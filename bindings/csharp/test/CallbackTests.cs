// Datasets and collation written as C# delegates, run on the loader's threads; an exception in a
// delegate comes back as AccelerateIOException with its message (it never unwinds through C++);
// the delegates stay alive while registered, even across garbage collections, and are released
// with their dataset.
using System;
using System.Collections.Generic;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class CallbackTests {
  static Tensor[] Sample(long i) {
    return new[] {Tensor.Of(new float[] {i, 2 * i}, 2), Tensor.Of(new long[] {i % 3})};
  }

  [Test]
  public void MapDatasetFromADelegateOnWorkerThreads() {
    long baseline = Library.LiveHandles(HandleKind.HandleAny);
    using (Dataset ds = Dataset.FromCallback(10, Sample))
    using (Options o = Options.DataLoader().Put("batch_size", 4).Put("num_workers", 2))
    using (var dl = new DataLoader(ds, o)) {
      for (int epoch = 0; epoch < 2; ++epoch) {
        var firsts = new List<float>();
        foreach (TensorList batch in dl) {
          using (batch)
          using (Tensor x = batch.Get(0)) {
            float[] v = x.ToFloatArray();
            for (int i = 0; i < v.Length; i += 2) firsts.Add(v[i]);
          }
          GC.Collect();  // the adapter and its delegates must survive this
          GC.WaitForPendingFinalizers();
        }
        Assert.AreEqual(new float[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, firsts.ToArray());
      }
    }
    Assert.AreEqual(baseline, Library.LiveHandles(HandleKind.HandleAny));
  }

  // Found by a hunt: Dispose freed the loader inside the proxy's lock while the library waited for the
  // loader's worker threads, whose delegate read IsDisposed on that lock: a deadlock (the test hangs
  // without the fix).
  [Test]
  public void DisposingOrRestartingALoaderWhileItsWorkersAskWhetherItIsDisposed() {
    for (int round = 0; round < 20; ++round) {
      DataLoader dl = null;
      Func<long, Tensor[]> fn = i => {
        if (dl.IsDisposed) throw new InvalidOperationException("disposed");
        return Sample(i);
      };
      using (Dataset ds = Dataset.FromCallback(4000, fn))
      using (Options o = Options.DataLoader().Put("batch_size", 2).Put("num_workers", 2)) {
        dl = new DataLoader(ds, o);
        for (int pass = 0; pass < 3; ++pass)
          foreach (TensorList batch in dl) break;  // the next pass ends this one's epoch
        foreach (TensorList batch in dl) {
          dl.Dispose();
          break;
        }
        Assert.IsTrue(dl.IsDisposed);
      }
    }
  }

  // Found by a hunt: a loop over the loader inside its own delegate is refused, and the loop that is
  // running goes on to the end of its epoch (it used to be ended by the refused one).
  [Test]
  public void ALoopInsideTheLoadersOwnDelegateIsRefusedAndTheRunningLoopGoesOn() {
    DataLoader dl = null;
    var refused = new List<string>();
    Func<long, Tensor[]> fn = i => {
      if (i == 3) {
        try {
          foreach (TensorList batch in dl) {}
        } catch (AccelerateInvalidArgumentException e) {
          refused.Add(e.Message);
        }
      }
      return Sample(i);
    };
    using (Dataset ds = Dataset.FromCallback(8, fn))
    using (Options o = Options.DataLoader().Put("batch_size", 2).Put("num_workers", 0))
    using (dl = new DataLoader(ds, o)) {
      int batches = 0;
      foreach (TensorList batch in dl) ++batches;
      Assert.AreEqual(4, batches);
      Assert.AreEqual(1, refused.Count);
      StringAssert.Contains("called from inside a callback", refused[0]);
    }
  }

  [Test]
  public void AnExceptionInACallbackIsAnIOErrorWithItsMessage() {
    Func<long, Tensor[]> fn = i => {
      if (i == 2) throw new InvalidOperationException("no sample two");
      return Sample(i);
    };
    using (Dataset ds = Dataset.FromCallback(4, fn))
    using (Options o = Options.DataLoader().Put("batch_size", 1).Put("num_workers", 0))
    using (var dl = new DataLoader(ds, o)) {
      dl.Next().Dispose();
      dl.Next().Dispose();
      var e = Assert.Throws<AccelerateIOException>(() => dl.Next());
      StringAssert.Contains("no sample two", e.Message);
      StringAssert.Contains("InvalidOperationException", e.Message);
    }
  }

  [Test]
  public void AnExceptionOnAWorkerThreadIsAnIOErrorToo() {
    using (Dataset ds = Dataset.FromCallback(8, i => { throw new ArgumentException("bad index " + i); }))
    using (Options o = Options.DataLoader().Put("batch_size", 2).Put("num_workers", 2))
    using (var dl = new DataLoader(ds, o)) {
      var e = Assert.Throws<AccelerateIOException>(() => dl.Next());
      StringAssert.Contains("bad index", e.Message);
    }
  }

  [Test]
  public void AMessageHoldingANulOrALoneSurrogateComesBackWithThemWrittenOut() {
    // A lone surrogate (a cut emoji) made the binding's refusal of it replace the user's message.
    foreach (int workers in new[] {0, 2}) {  // the calling thread and the loader's threads: nothing
      // may escape the delegate's adapter, and the loader must not be left inside its callback
      using (Dataset ds = Dataset.FromCallback(4, i => { throw new InvalidOperationException("bad\0sample \uD83D cut " + i); }))
      using (Options o = Options.DataLoader().Put("batch_size", 1).Put("num_workers", workers))
      using (var dl = new DataLoader(ds, o)) {
        for (int attempt = 0; attempt < 2; ++attempt) {
          var e = Assert.Throws<AccelerateIOException>(() => dl.Next());
          StringAssert.Contains("InvalidOperationException: bad\\0sample \\uD83D cut", e.Message);
        }
      }
    }
  }

  [Test]
  public void StreamFromDelegates() {
    int epochs = 0, next = 0;
    using (Dataset ds = Dataset.FromIterator(() => next < 5 ? Sample(next++) : null, epoch => { next = 0; ++epochs; }, 5))
    using (Options o = Options.DataLoader().Put("batch_size", 2))
    using (var dl = new DataLoader(ds, o)) {
      for (int epoch = 0; epoch < 2; ++epoch) {
        long seen = 0;
        foreach (TensorList batch in dl)
          using (batch)
          using (Tensor y = batch.Get(1)) seen += y.Numel;
        Assert.AreEqual(5, seen);
      }
    }
    Assert.AreEqual(2, epochs);
  }

  [Test]
  public void CollateFromADelegate() {
    using (Dataset ds = Dataset.FromCallback(6, Sample))
    using (Options o = Options.DataLoader().Put("batch_size", 3).Put("num_workers", 0))
    using (var dl = new DataLoader(ds, o)) {
      dl.SetCollate(samples => {
        float sum = 0;
        foreach (Tensor[] s in samples)
          using (Tensor total = s[0].Sum()) sum += (float)total.Item();
        return new[] {Tensor.Of(new float[] {sum, samples.Count}, 2)};
      });
      using (TensorList batch = dl.Next())
      using (Tensor t = batch.Get(0))
        Assert.AreEqual(new float[] {9f, 3f}, t.ToFloatArray());  // (0+1+2) * 3
    }
  }

  [Test]
  public void UnevenSamplesFailCollationWithTheLibrarysMessage() {
    Func<long, Tensor[]> fn = i => i == 1 ? new[] {Tensor.Of(new float[] {1f}, 1)} : Sample(i);
    using (Dataset ds = Dataset.FromCallback(4, fn))
    using (Options o = Options.DataLoader().Put("batch_size", 2).Put("num_workers", 0))
    using (var dl = new DataLoader(ds, o)) {
      dl.SetCollate(samples => { throw new InvalidOperationException("collate ran on uneven samples"); });
      var e = Assert.Catch<AccelerateException>(() => dl.Next());
      StringAssert.Contains("sample 1 has 1 fields but sample 0 has 2", e.Message);
    }
  }

  [Test]
  public void DelegatesAreReleasedWithTheirOwners() {
    long baseline = Library.LiveCallbacks();
    Dataset ds = Dataset.FromCallback(3, Sample);
    using (Options o = Options.DataLoader().Put("batch_size", 3))
    using (var dl = new DataLoader(ds, o)) {
      dl.SetCollate(samples => new[] {Tensor.Of(new float[] {samples.Count}, 1)});
      Assert.AreEqual(baseline + 2, Library.LiveCallbacks());
      ds.Dispose();  // the loader keeps the dataset, and so its delegate
      using (TensorList batch = dl.Next()) Assert.AreEqual(1, batch.Count);
      Assert.AreEqual(baseline + 2, Library.LiveCallbacks());
    }
    Assert.AreEqual(baseline, Library.LiveCallbacks());
  }

  [Test]
  public void AFailedRegistrationReleasesTheDelegate() {
    long baseline = Library.LiveCallbacks();
    Dataset ds = Dataset.FromCallback(1, Sample);
    var loader = new DataLoader(ds, null);
    loader.Dispose();
    ds.Dispose();
    Assert.Throws<AccelerateInvalidHandleException>(() => loader.SetCollate(s => new Tensor[0]));
    Assert.AreEqual(baseline, Library.LiveCallbacks());
  }
}

}

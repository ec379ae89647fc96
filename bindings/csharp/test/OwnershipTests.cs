// Who frees what: a pass over a loader owns its batches and the tensors taken from them, a tensor
// scope owns what is made inside it, and a foreach left with break ends its epoch.
using System;
using System.IO;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class OwnershipTests {
  const int N = 3200, D = 784, C = 10, Batch = 64;
  const string Spec = "[{\"type\":\"linear\",\"in_features\":784,\"out_features\":32},{\"type\":\"relu\"},"
      + "{\"type\":\"linear\",\"in_features\":32,\"out_features\":10}]";

  static long RssKb() {
    foreach (string line in File.ReadAllLines("/proc/self/status"))
      if (line.StartsWith("VmRSS:")) return long.Parse(Regex.Replace(line, "[^0-9]", ""));
    throw new InvalidOperationException("no VmRSS");
  }

  static Dataset MakeDataset() {
    var x = new float[N * D];
    var y = new long[N];
    for (int i = 0; i < x.Length; ++i) x[i] = (i % 97) / 97f;
    for (int i = 0; i < N; ++i) y[i] = i % C;
    using (Tensor xt = Tensor.Of(x, N, D))
    using (Tensor yt = Tensor.Of(y, N))
    using (TensorList fields = TensorList.Of(xt, yt))
      return Dataset.FromTensors(fields);
  }

  // 1 000 training steps that never dispose the batches or the tensors taken from them, the step's
  // own tensors in a scope: live handles and resident memory stay flat (1 000 leaked 200 KB batches
  // would be 200 MB).
  [Test]
  public void AThousandNaiveStepsStayFlat() {
    long baseline = Library.LiveHandles(HandleKind.HandleAny);
    using (Options ao = Options.Accelerator().Put("seed", 1))
    using (var acc = new Accelerator(ao))
    using (Dataset ds = MakeDataset())
    using (Options lo = Options.DataLoader().Put("batch_size", Batch).Put("shuffle", true))
    using (var raw = new DataLoader(ds, lo))
    using (DataLoader loader = acc.Prepare(raw))
    using (Model rawModel = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(rawModel))
    using (Options oo = Options.Optimizer().Put("lr", 0.01))
    using (var rawOpt = new Optimizer(model, "sgd", oo))
    using (Optimizer opt = acc.Prepare(rawOpt)) {
      long handlesAt50 = -1, rssAt50 = -1, maxHandles = -1;
      int steps = 0;
      while (steps < 1000) {
        foreach (TensorList batch in loader) {
          Tensor x = batch.Get(0), y = batch.Get(1);  // never disposed: the batch's
          using (Tensors.Scope()) {
            Tensor loss = Loss.CrossEntropy(model.Forward(x), y, Reduction.Mean, 0.0);  // the scope's
            acc.Backward(loss);
            opt.Step();
            opt.ZeroGrad();
          }
          // Measured after every step from the first of the second epoch (step 51) on: a batch or
          // tensor kept per step would add handles within each epoch.
          long h = Library.LiveHandles(HandleKind.HandleAny);
          if (++steps == 51) {
            handlesAt50 = h;
            rssAt50 = RssKb();
          } else if (steps > 51) {
            maxHandles = Math.Max(maxHandles, h);
          }
          if (steps >= 1000) break;
        }
      }
      long growthKb = RssKb() - rssAt50;
      Console.WriteLine("OwnershipTests: 1000 naive steps: handles " + handlesAt50 + " at step 51, at most " +
                        maxHandles + " after; RSS growth after step 51: " + growthKb + " KiB");
      // (finalizers may free earlier tests' forgotten objects meanwhile: fewer is fine)
      Assert.LessOrEqual(maxHandles, handlesAt50, "live handles grew");
      Assert.Less(growthKb, 64 * 1024, "RSS grew");
    }
    Assert.LessOrEqual(Library.LiveHandles(HandleKind.HandleAny), baseline);
  }

  [Test]
  public void ThePassReleasesTheLastBatchUnlessKept() {
    using (Dataset ds = MakeDataset())
    using (Options lo = Options.DataLoader().Put("batch_size", 1600))
    using (var loader = new DataLoader(ds, lo)) {
      TensorList first = null, second = null;
      Tensor x = null;
      foreach (TensorList batch in loader) {
        if (first == null) {
          first = batch.Keep();
          x = first.Get(0);
        } else {
          second = batch;
        }
      }
      Assert.IsFalse(first.IsDisposed, "a kept batch stays alive");
      Assert.IsFalse(x.IsDisposed, "a kept batch keeps its tensors");
      Assert.IsTrue(second.IsDisposed, "the epoch's end released the last batch");
      first.Dispose();
      Assert.IsTrue(x.IsDisposed, "disposing a batch disposes the tensors taken from it");
    }
  }

  [Test]
  public void AScopeDisposesWhatWasMadeInsideItButNotWhatWasKept() {
    long baseline = Tensors.LiveHandles;
    Tensor kept, dropped;
    using (TensorScope outer = Tensors.Scope()) {
      using (TensorScope inner = Tensors.Scope()) {
        dropped = Tensor.Of(new float[] {1, 2}, 2);
        kept = dropped.Sum().Keep();
        Assert.AreEqual(1, inner.Held);
        Assert.AreEqual(0, outer.Held);
      }
      Assert.IsTrue(dropped.IsDisposed);
      Assert.IsFalse(kept.IsDisposed);
      Assert.AreEqual(3.0, kept.Item());
    }
    Assert.IsFalse(kept.IsDisposed);
    kept.Dispose();
    Assert.LessOrEqual(Tensors.LiveHandles, baseline);
  }

  [Test]
  public void BreakingOutEndsTheEpochSoLoadStateTakesTheLoader() {
    string dir = TestDirs.Temp();
    try {
      using (Options ao = Options.Accelerator().Put("seed", 3))
      using (var acc = new Accelerator(ao))
      using (Dataset ds = MakeDataset())
      using (Options lo = Options.DataLoader().Put("batch_size", 320).Put("shuffle", true))
      using (var raw = new DataLoader(ds, lo))
      using (DataLoader loader = acc.Prepare(raw)) {
        TensorList last = null;
        int seen = 0;
        foreach (TensorList batch in loader) {
          last = batch;
          if (++seen == 3) {
            acc.SaveState(dir);
            break;
          }
        }
        Assert.IsFalse(loader.InEpoch, "break disposed the pass, which ended the epoch");
        Assert.IsTrue(last.IsDisposed, "and released its batch");
        Assert.AreEqual(1, loader.Epoch);
        acc.LoadState(dir);  // refused mid-epoch
        int rest = 0;
        foreach (TensorList batch in loader) ++rest;
        Assert.AreEqual(7, rest, "the saved epoch resumes after its third batch");
        int whole = 0;
        foreach (TensorList batch in loader) ++whole;
        Assert.AreEqual(10, whole);
      }
    } finally {
      Directory.Delete(dir, true);
    }
  }

  // A foreach over a loader inside a foreach over the same loader: the inner loop ended the outer
  // one's epoch, and the outer loop stopped quietly (one object) or went on into the next epochs for
  // ever (two handles of one prepared loader). It ends with an error now.
  [Test]
  public void ALoopInsideALoopOverTheSameLoaderEndsTheOuterLoopWithAnError() {
    using (var acc = new Accelerator(null))
    using (Dataset ds = MakeDataset())
    using (Options lo = Options.DataLoader().Put("batch_size", 800))
    using (var raw = new DataLoader(ds, lo))
    using (DataLoader first = acc.Prepare(raw))
    using (DataLoader second = acc.Prepare(raw)) {
      foreach (DataLoader inner in new[] { first, second }) {
        int outer = 0, inside = 0;
        var e = Assert.Throws<InvalidOperationException>(() => {
          foreach (TensorList batch in first) {
            Assert.That(++outer, Is.LessThan(3), "the outer loop went past its epoch");
            foreach (TensorList b in inner) ++inside;
          }
        });
        StringAssert.Contains("cannot nest", e.Message);
        Assert.AreEqual(1, outer);
        Assert.AreEqual(4, inside);
        int next = 0;
        foreach (TensorList batch in first) ++next;
        Assert.AreEqual(4, next, "a loop after them runs a whole epoch");
      }
    }
  }

  // Disposing ended the epoch while the loop's Next ran on the other thread (SIGSEGV).
  [Test]
  public void ALoaderDisposedOnAnotherThreadEndsTheLoopWithAnExceptionNotACrash() {
    long baseline = Library.LiveHandles(HandleKind.HandleAny);
    for (int round = 0; round < 5; ++round) {
      // A slow dataset: the Dispose comes long before the epoch's end.
      using (Dataset ds = Dataset.FromCallback(1000, index => {
               System.Threading.Thread.Sleep(2);
               return new[] { Tensor.Of(new float[] { index }, 1) };
             }))
      using (Options lo = Options.DataLoader().Put("batch_size", 1).Put("num_workers", 2)) {
        var loader = new DataLoader(ds, lo);
        var started = new System.Threading.ManualResetEventSlim();
        var closer = new System.Threading.Thread(() => {
          started.Wait();
          loader.Dispose();
        });
        closer.Start();
        int seen = 0;
        Assert.Throws<AccelerateInvalidHandleException>(() => {
          foreach (TensorList batch in loader)
            if (++seen == 1) started.Set();
        });
        closer.Join();
        Assert.IsTrue(loader.IsDisposed);
      }
      Assert.That(Library.LiveHandles(HandleKind.HandleAny), Is.LessThanOrEqualTo(baseline),
                  "a batch outlived the disposed loader");
    }
  }
}

}

package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Who frees what: a loop over a loader owns its batches and the tensors taken from them, a tensor
 *  scope owns what is made inside it, and a loop left with break ends its epoch. */
class OwnershipTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static final int N = 3200, D = 784, C = 10, BATCH = 64;
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":784,\"out_features\":32},{\"type\":\"relu\"},"
      + "{\"type\":\"linear\",\"in_features\":32,\"out_features\":10}]";

  static long rssKb() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status")))
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    throw new IllegalStateException("no VmRSS");
  }

  static Dataset dataset() {
    float[] x = new float[N * D];
    long[] y = new long[N];
    for (int i = 0; i < x.length; ++i) x[i] = (i % 97) / 97f;
    for (int i = 0; i < N; ++i) y[i] = i % C;
    try (Tensor xt = Tensor.of(x, N, D); Tensor yt = Tensor.of(y, N); TensorList fields = TensorList.of(xt, yt)) {
      return Dataset.fromTensors(fields);
    }
  }

  /** 1 000 training steps written without closing the batches or the tensors taken from them, the
   *  step's own tensors in a scope: live handles and resident memory stay flat (each batch is 200 KB,
   *  so 1 000 leaked batches would be 200 MB). */
  @Test
  void aThousandNaiveStepsStayFlat() throws Exception {
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
    try (Options ao = Options.accelerator().put("seed", 1);
         Accelerator acc = new Accelerator(ao);
         Dataset ds = dataset();
         Options lo = Options.dataLoader().put("batch_size", BATCH).put("shuffle", true);
         DataLoader raw = new DataLoader(ds, lo);
         DataLoader loader = acc.prepare(raw);
         Model rawModel = Model.fromSpec(SPEC);
         Model model = acc.prepare(rawModel);
         Options oo = Options.optimizer().put("lr", 0.01);
         Optimizer rawOpt = new Optimizer(model, "sgd", oo);
         Optimizer opt = acc.prepare(rawOpt)) {
      long handlesAtStep50 = -1, rssAtStep50 = -1, maxHandles = -1;
      int steps = 0;
      while (steps < 1000) {
        for (TensorList batch : loader) {
          Tensor x = batch.get(0);  // never closed: the batch's
          Tensor y = batch.get(1);
          try (TensorScope step = Tensors.scope()) {
            Tensor loss = Loss.crossEntropy(model.forward(x), y, Reduction.MEAN, 0.0);  // the scope's
            acc.backward(loss);
            opt.step();
            opt.zeroGrad();
          }
          // Measured after every step from the first of the second epoch (step 51) on: a batch or
          // tensor kept per step would add handles within each epoch.
          long h = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
          if (++steps == 51) {
            handlesAtStep50 = h;
            rssAtStep50 = rssKb();
          } else if (steps > 51) {
            maxHandles = Math.max(maxHandles, h);
          }
          if (steps >= 1000) break;
        }
      }
      long growthKb = rssKb() - rssAtStep50;
      System.out.println("OwnershipTest: 1000 naive steps: handles " + handlesAtStep50 + " at step 51, at most "
          + maxHandles + " after; RSS growth after step 51: " + growthKb + " KiB");
      // (the Cleaner may free earlier tests' forgotten objects meanwhile: fewer is fine)
      assertTrue(maxHandles <= handlesAtStep50, "live handles grew from " + handlesAtStep50 + " to " + maxHandles);
      assertTrue(growthKb < 64 * 1024, "RSS grew by " + growthKb + " KiB");
    }
    assertTrue(Accelerate.liveHandles(HandleKind.HANDLE_ANY) <= baseline, "handles left after closing everything");
  }

  @Test
  void theLoopReleasesTheLastBatchUnlessKept() {
    try (Dataset ds = dataset();
         Options lo = Options.dataLoader().put("batch_size", 1600);
         DataLoader loader = new DataLoader(ds, lo)) {
      TensorList first = null, second = null;
      Tensor x = null;
      for (TensorList batch : loader) {
        if (first == null) {
          first = batch.keep();
          x = first.get(0);
        } else {
          second = batch;
        }
      }
      assertFalse(first.isClosed(), "a kept batch stays open");
      assertFalse(x.isClosed(), "a kept batch keeps its tensors");
      assertTrue(second.isClosed(), "the epoch's end released the last batch");
      first.close();
      assertTrue(x.isClosed(), "closing a batch closes the tensors taken from it");
    }
  }

  @Test
  void aScopeClosesWhatWasMadeInsideItButNotWhatWasKept() {
    long baseline = Tensors.liveHandles();
    Tensor kept, dropped;
    try (TensorScope outer = Tensors.scope()) {
      try (TensorScope inner = Tensors.scope()) {
        dropped = Tensor.of(new float[] {1, 2}, 2);
        kept = dropped.sum().keep();
        assertEquals(1, inner.held());
        assertEquals(0, outer.held());
      }
      assertTrue(dropped.isClosed());
      assertFalse(kept.isClosed());
      assertEquals(3.0, kept.item());
    }
    assertFalse(kept.isClosed());
    kept.close();
    assertTrue(Tensors.liveHandles() <= baseline, "tensors left after the scopes");
  }

  @Test
  void breakingOutEndsTheEpochForTheNextLoopAndForLoadState() throws Exception {
    try (Options ao = Options.accelerator().put("seed", 3);
         Accelerator acc = new Accelerator(ao);
         Dataset ds = dataset();
         Options lo = Options.dataLoader().put("batch_size", 320).put("shuffle", true);
         DataLoader raw = new DataLoader(ds, lo);
         DataLoader loader = acc.prepare(raw)) {
      TensorList last = null;
      int seen = 0;
      for (TensorList batch : loader) {
        last = batch;
        if (++seen == 3) break;
      }
      assertTrue(loader.inEpoch(), "for-each cannot see a break");
      acc.saveState(dir.toString());
      int again = 0;
      for (TensorList batch : loader) ++again;  // starts by ending the unfinished epoch
      assertEquals(10, again, "the next loop runs a whole epoch");
      assertTrue(last.isClosed(), "the next loop released the batch the broken one held");
      assertEquals(2, loader.epoch());
      try (Batches batches = loader.batches()) {
        for (TensorList batch : batches) break;
      }
      assertFalse(loader.inEpoch(), "closing the pass ended the epoch");
      acc.loadState(dir.toString());  // refused mid-epoch; accepted now
      int rest = 0;
      for (TensorList batch : loader) ++rest;
      assertEquals(7, rest, "the saved epoch resumes after its third batch");
    }
  }

  @Test
  void aLoopOverALoaderInsideALoopOverTheSameLoaderEndsTheOuterLoopWithAnError() throws Exception {
    // The inner loop ended the outer one's epoch: the outer loop stopped after one batch without a
    // word (one proxy), or went on into the next epochs for ever (two handles of one prepared loader).
    try (Accelerator acc = new Accelerator(null);
         Dataset ds = dataset();
         Options lo = Options.dataLoader().put("batch_size", 800);
         DataLoader raw = new DataLoader(ds, lo);
         DataLoader first = acc.prepare(raw);
         DataLoader second = acc.prepare(raw)) {
      for (DataLoader inner : new DataLoader[] {first, second}) {
        int outer = 0, inside = 0;
        try {
          for (TensorList batch : first) {
            assertTrue(++outer < 3, "the outer loop went past its epoch");
            for (TensorList b : inner) ++inside;
          }
          fail("the outer loop ended quietly");
        } catch (IllegalStateException e) {
          assertTrue(e.getMessage().contains("cannot nest"), e.getMessage());
        }
        assertEquals(1, outer);
        assertEquals(4, inside);
        int next = 0;
        for (TensorList batch : first) ++next;
        assertEquals(4, next, "a loop after them runs a whole epoch");
      }
    }
  }

  @Test
  void aLoaderClosedOnAnotherThreadEndsTheLoopWithAnExceptionNotACrash() throws Exception {
    // Closing ended the epoch while the loop's next was running on the other thread (SIGSEGV).
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
    for (int round = 0; round < 5; ++round) {
      // A slow dataset: the close comes long before the epoch's end.
      try (Dataset ds = Dataset.fromCallback(1000, index -> {
             Thread.sleep(2);
             return new Tensor[] {Tensor.of(new float[] {index}, 1)};
           });
           Options lo = Options.dataLoader().put("batch_size", 1).put("num_workers", 2)) {
        DataLoader loader = new DataLoader(ds, lo);
        java.util.concurrent.CountDownLatch started = new java.util.concurrent.CountDownLatch(1);
        Thread closer = new Thread(() -> {
          try {
            started.await();
          } catch (InterruptedException e) {
            return;
          }
          loader.close();
        });
        closer.start();
        int seen = 0;
        try {
          for (TensorList batch : loader) {
            if (++seen == 1) started.countDown();
          }
          fail("the loop ran to its end although its loader was closed (" + seen + " batches)");
        } catch (AccelerateException e) {
          assertTrue(loader.isClosed());
        }
        closer.join();
      }
      assertTrue(Accelerate.liveHandles(HandleKind.HANDLE_ANY) <= baseline, "a batch outlived the closed loader");
    }
  }
}

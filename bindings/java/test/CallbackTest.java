package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Datasets and collation written as Java lambdas, on the loader's threads; a Java exception in a
 *  callback comes back as AccelerateIOException with its message, and the lambdas are released with the
 *  dataset. */
class CallbackTest {
  static Tensor[] sample(long i) {
    return new Tensor[] {Tensor.of(new float[] {i, 2 * i}, 2), Tensor.of(new long[] {i % 3}, new long[0])};
  }

  @Test
  void mapDatasetFromALambdaOnWorkerThreads() {
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
    try (Dataset ds = Dataset.fromCallback(10, CallbackTest::sample);
         Options o = Options.dataLoader().put("batch_size", 4).put("num_workers", 2);
         DataLoader dl = new DataLoader(ds, o)) {
      List<Float> firsts = new ArrayList<>();
      for (TensorList batch : dl) {
        try (batch; Tensor x = batch.get(0)) {
          float[] v = x.toFloatArray();
          for (int i = 0; i < v.length; i += 2) firsts.add(v[i]);
        }
      }
      assertEquals(List.of(0f, 1f, 2f, 3f, 4f, 5f, 6f, 7f, 8f, 9f), firsts);
    }
    assertEquals(baseline, Accelerate.liveHandles(HandleKind.HANDLE_ANY));
  }

  /** A null function is refused when the object is made, not at its first call (which used to be an
   *  AccelerateIOException carrying a NullPointerException from inside the binding). */
  @Test
  void aNullFunctionIsRefusedWhenTheObjectIsMade() {
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
    assertThrows(NullPointerException.class, () -> Dataset.fromCallback(4, null));
    assertThrows(NullPointerException.class, () -> Dataset.fromIterator(null, -1));
    try (Model model = Model.fromSpec(FreezeTest.SPEC); Optimizer opt = new Optimizer(model, "sgd", null);
         Accelerator acc = new Accelerator(null)) {
      NullPointerException e = assertThrows(NullPointerException.class, () -> Scheduler.fromLambda(opt, null));
      assertTrue(e.getMessage().contains("the function is null"), e.getMessage());
      assertThrows(NullPointerException.class, () -> Scheduler.fromMultiplicative(opt, null));
      List<LrLambdaFunction> one = new ArrayList<>();
      one.add(null);
      assertThrows(NullPointerException.class, () -> Scheduler.fromLambdas(opt, one));
      NullPointerException none = assertThrows(NullPointerException.class, () -> Scheduler.fromMultiplicatives(opt, null));
      assertTrue(none.getMessage().contains("the functions are null"), none.getMessage());
      assertThrows(NullPointerException.class, () -> acc.addTracker("mine", null));
      assertThrows(NullPointerException.class, () -> acc.registerForCheckpointing((CheckpointState) null));
    }
    assertEquals(baseline, Accelerate.liveHandles(HandleKind.HANDLE_ANY));
  }

  /** Found by a hunt: close() and a new pass held the proxy's lock while the library waited for the
   *  loader's worker threads, whose function called isClosed() on that lock: a deadlock (the test
   *  hangs without the fix). */
  @Test
  void closingOrRestartingALoaderWhileItsWorkersAskWhetherItIsClosed() {
    for (int round = 0; round < 20; ++round) {
      DataLoader[] dl = new DataLoader[1];
      try (Dataset ds = Dataset.fromCallback(4000, i -> {
             if (dl[0].isClosed()) throw new IllegalStateException("closed");
             return sample(i);
           });
           Options o = Options.dataLoader().put("batch_size", 2).put("num_workers", 2)) {
        dl[0] = new DataLoader(ds, o);
        for (int pass = 0; pass < 3; ++pass)
          for (TensorList batch : dl[0]) break;  // the next pass ends this one's epoch
        for (TensorList batch : dl[0]) {
          dl[0].close();
          break;
        }
        assertTrue(dl[0].isClosed());
      }
    }
  }

  /** Found by a hunt: a loop over the loader inside its own function is refused, and the loop that
   *  is running goes on to the end of its epoch (it used to be ended by the refused one). */
  @Test
  void aLoopInsideTheLoadersOwnFunctionIsRefusedAndTheRunningLoopGoesOn() {
    DataLoader[] dl = new DataLoader[1];
    List<String> refused = new ArrayList<>();
    try (Dataset ds = Dataset.fromCallback(8, i -> {
           if (i == 3) {
             try {
               for (TensorList batch : dl[0]) {}
             } catch (InvalidArgumentException e) {
               refused.add(e.getMessage());
             }
           }
           return sample(i);
         });
         Options o = Options.dataLoader().put("batch_size", 2).put("num_workers", 0)) {
      dl[0] = new DataLoader(ds, o);
      int batches = 0;
      for (TensorList batch : dl[0]) ++batches;
      assertEquals(4, batches);
      assertEquals(1, refused.size());
      assertTrue(refused.get(0).contains("called from inside a callback"), refused.get(0));
      dl[0].close();
    }
  }

  @Test
  void anExceptionInACallbackIsAnIoErrorWithItsMessage() {
    try (Dataset ds = Dataset.fromCallback(4, i -> {
           if (i == 2) throw new IllegalStateException("no sample two");
           return sample(i);
         });
         Options o = Options.dataLoader().put("batch_size", 1).put("num_workers", 0);
         DataLoader dl = new DataLoader(ds, o)) {
      dl.next().close();
      dl.next().close();
      AccelerateIOException e = assertThrows(AccelerateIOException.class, dl::next);
      assertTrue(e.getMessage().contains("no sample two"), e.getMessage());
    }
  }

  @Test
  void aMessageHoldingANulOrALoneSurrogateComesBackWithThemWrittenOut() {
    // A lone surrogate (a cut emoji) made the binding's refusal of it replace the user's message.
    for (int workers : new int[] {0, 2}) {  // the calling thread and the loader's threads
      try (Dataset ds = Dataset.fromCallback(4, i -> {
             throw new IllegalStateException("bad\0sample \ud83d cut " + i);
           });
           Options o = Options.dataLoader().put("batch_size", 1).put("num_workers", workers);
           DataLoader dl = new DataLoader(ds, o)) {
        AccelerateIOException e = assertThrows(AccelerateIOException.class, dl::next);
        assertTrue(e.getMessage().contains("IllegalStateException: bad\\0sample \\uD83D cut"), e.getMessage());
      }
    }
  }

  @Test
  void streamFromALambda() {
    int[] epochs = {0};
    StreamFunction stream = new StreamFunction() {
      int next;

      @Override
      public void start(long epoch) {
        next = 0;
        epochs[0]++;
      }

      @Override
      public Tensor[] next() {
        return next < 5 ? sample(next++) : null;
      }
    };
    try (Dataset ds = Dataset.fromIterator(stream, 5);
         Options o = Options.dataLoader().put("batch_size", 2);
         DataLoader dl = new DataLoader(ds, o)) {
      for (int epoch = 0; epoch < 2; ++epoch) {
        long seen = 0;
        for (TensorList batch : dl) {
          try (batch; Tensor y = batch.get(1)) {
            seen += y.numel();
          }
        }
        assertEquals(5, seen);
      }
    }
    assertEquals(2, epochs[0]);
  }

  @Test
  void collateFromALambda() {
    try (Dataset ds = Dataset.fromCallback(6, CallbackTest::sample);
         Options o = Options.dataLoader().put("batch_size", 3).put("num_workers", 0);
         DataLoader dl = new DataLoader(ds, o)) {
      dl.setCollate(samples -> {
        float sum = 0;
        for (Tensor[] s : samples)
          try (Tensor total = s[0].sum()) {
            sum += (float) total.item();
          }
        return new Tensor[] {Tensor.of(new float[] {sum, samples.size()}, 2)};
      });
      try (TensorList batch = dl.next(); Tensor t = batch.get(0)) {
        assertArrayEquals(new float[] {9f, 3f}, t.toFloatArray());  // (0+1+2) * 3
      }
    }
  }

  @Test
  void unevenSamplesFailCollationWithTheLibrarysMessage() {
    try (Dataset ds = Dataset.fromCallback(4, i -> i == 1 ? new Tensor[] {Tensor.of(new float[] {1f}, 1)} : sample(i));
         Options o = Options.dataLoader().put("batch_size", 2).put("num_workers", 0);
         DataLoader dl = new DataLoader(ds, o)) {
      dl.setCollate(samples -> {
        throw new IllegalStateException("collate ran on uneven samples");
      });
      AccelerateException e = assertThrows(AccelerateException.class, dl::next);
      assertTrue(e.getMessage().contains("sample 1 has 1 fields but sample 0 has 2"), e.getMessage());
    }
  }
}

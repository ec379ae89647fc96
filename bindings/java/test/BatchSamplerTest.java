package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.junit.jupiter.api.Test;

/** DataLoader.fromBatches: a batch sampler's batches of varying sizes, in their order, every epoch;
 *  what the C API refuses arrives as InvalidArgumentException with its message. */
class BatchSamplerTest {
  /** The dataset's one field is the sample's own index, so a batch shows which samples it holds. */
  static Dataset counting(int n) {
    long[] ids = new long[n];
    for (int i = 0; i < n; ++i) ids[i] = i;
    try (Tensor t = Tensor.of(ids, n); TensorList fields = TensorList.of(t)) {
      return Dataset.fromTensors(fields);
    }
  }

  static List<List<Long>> epoch(DataLoader loader) {
    List<List<Long>> out = new ArrayList<>();
    for (TensorList batch : loader) {
      try (batch; Tensor ids = batch.get(0)) {
        List<Long> b = new ArrayList<>();
        for (long v : ids.toLongArray()) b.add(v);
        out.add(b);
      }
    }
    return out;
  }

  @Test
  void batchesOfVaryingSizesInTheirOrderEveryEpoch() {
    long[][] batches = {{9}, {0, 1, 5}, {2, 3, 4}};
    List<List<Long>> expected = List.of(List.of(9L), List.of(0L, 1L, 5L), List.of(2L, 3L, 4L));
    try (Dataset ds = counting(10); DataLoader loader = DataLoader.fromBatches(ds, batches, null)) {
      assertEquals(3, loader.length());
      assertEquals(expected, epoch(loader));
      assertEquals(expected, epoch(loader));
    }
    // The List overload, with loader options that do apply.
    try (Dataset ds = counting(10); Options o = Options.dataLoader().put("num_workers", 0);
         DataLoader loader = DataLoader.fromBatches(ds, List.of(new long[] {7, 8}, new long[] {6}), o)) {
      assertEquals(List.of(List.of(7L, 8L), List.of(6L)), epoch(loader));
    }
  }

  @Test
  void refusedBatchesAndOptionsRaiseWithTheLibrarysMessage() {
    try (Dataset ds = counting(10)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> DataLoader.fromBatches(ds, new long[][] {{3, 10}}, null));
      assertTrue(e.getMessage().contains("index 10, outside the dataset of 10"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class,
          () -> DataLoader.fromBatches(ds, new long[][] {{1, 2}, {}}, null));
      assertTrue(e.getMessage().contains("batch 1 of the batch sampler is empty"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> DataLoader.fromBatches(ds, new long[0][], null));
      assertTrue(e.getMessage().contains("num_batches"), e.getMessage());
      try (Options o = Options.dataLoader().put("shuffle", true)) {
        e = assertThrows(InvalidArgumentException.class, () -> DataLoader.fromBatches(ds, new long[][] {{1}}, o));
        assertTrue(e.getMessage().contains("'shuffle' does not apply"), e.getMessage());
      }
      assertThrows(NullPointerException.class, () -> DataLoader.fromBatches(ds, new long[][] {{1}, null}, null));
    }
  }

  /** Two shuffling loaders read in step after setSeed: how each pass starts is what differs. */
  enum Start { PASSES_FIRST, ITER_BY_HAND, AT_FIRST_BATCH }

  static List<List<Long>> inStep(Start start) {
    Accelerate.setSeed(1234);
    List<List<Long>> orders = List.of(new ArrayList<>(), new ArrayList<>());
    try (Dataset ds = counting(24); Options o = Options.dataLoader().put("batch_size", 6).put("shuffle", true);
         DataLoader first = new DataLoader(ds, o); DataLoader second = new DataLoader(ds, o)) {
      DataLoader[] loaders = {first, second};
      List<Iterator<TensorList>> passes = new ArrayList<>();
      for (DataLoader loader : loaders) {
        if (start == Start.PASSES_FIRST) passes.add(loader.iterator());
        if (start == Start.ITER_BY_HAND) loader.iter();
      }
      for (int batch = 0; batch < 4; ++batch) {
        for (int i = 0; i < 2; ++i) {
          try (TensorList b = passes.isEmpty() ? loaders[i].next() : passes.get(i).next().keep(); Tensor ids = b.get(0)) {
            for (long v : ids.toLongArray()) orders.get(i).add(v);
          }
        }
      }
    }
    return orders;
  }

  @Test
  void passesMadeBeforeTheirFirstBatchDrawAsPythonsZip() {
    // A pass is Python's iterator: made before either's first batch, both take their iterator's draw
    // first, as iter() by hand does (held to PyTorch's zip(dl0, dl1) in the C API's tests).
    List<List<Long>> zipped = inStep(Start.ITER_BY_HAND);
    assertEquals(zipped, inStep(Start.PASSES_FIRST));
    assertNotEquals(zipped.get(0), inStep(Start.AT_FIRST_BATCH).get(0));  // its sampler drew after the second's base seed
  }
}

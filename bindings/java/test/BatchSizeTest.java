package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Accelerate.findExecutableBatchSize with a Java lambda: the library's OutOfMemoryException shrinks
 *  the batch; other exceptions end the search as the C API documents. */
class BatchSizeTest {
  @Test
  void aBatchThatDoesNotFitIsTriedAgainSmaller() {
    List<Long> tried = new ArrayList<>();
    long found = Accelerate.findExecutableBatchSize(16, batchSize -> {
      tried.add(batchSize);
      // Above 8, 2^48 bytes a sample: more than any address space, a real allocation failure.
      try (Tensor t = Tensor.zeros(new long[] {batchSize, batchSize > 8 ? 1L << 46 : 4}, DType.FLOAT32, "")) {
      }
    });
    assertEquals(8, found);
    assertEquals(List.of(16L, 14L, 12L, 10L, 9L, 8L), tried);
  }

  @Test
  void otherExceptionsEndTheSearch() {
    AccelerateIOException io = assertThrows(AccelerateIOException.class,
        () -> Accelerate.findExecutableBatchSize(32, batchSize -> { throw new IllegalStateException("no data"); }));
    assertTrue(io.getMessage().contains("the run with batch size 32 failed: IllegalStateException: no data"),
        io.getMessage());
    assertThrows(InvalidArgumentException.class, () -> Accelerate.findExecutableBatchSize(32, batchSize -> {
      try (Options o = Options.accelerator()) {
        o.put("no_such_option", 1);  // the library's InvalidArgumentException
      }
    }));
    OutOfMemoryException none = assertThrows(OutOfMemoryException.class,
        () -> Accelerate.findExecutableBatchSize(2, batchSize -> { throw new OutOfMemoryException("too big"); }));
    assertTrue(none.getMessage().contains("no executable batch size found"), none.getMessage());
  }
}

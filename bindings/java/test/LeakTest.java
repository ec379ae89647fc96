package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** 100 000 tensors made and dropped: live handles return to the baseline and memory with them. */
class LeakTest {
  static long rssKb() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status")))
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    throw new IllegalStateException("no VmRSS");
  }

  @Test
  void closedTensorsAreFreed() throws Exception {
    float[] data = new float[256];  // 1 KiB per tensor: 100 MB if none were freed
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_ANY);
    for (int i = 0; i < 1000; ++i) Tensor.of(data, 256).close();  // warm up allocators
    long rssBefore = rssKb();
    for (int i = 0; i < 100_000; ++i) {
      try (Tensor t = Tensor.of(data, 256); Tensor s = t.sum()) {
        if (i % 25_000 == 0) assertEquals(0.0, s.item());
      }
    }
    assertEquals(baseline, Accelerate.liveHandles(HandleKind.HANDLE_ANY));
    long growthKb = rssKb() - rssBefore;
    System.out.println("LeakTest: RSS growth after 100000 closed tensors: " + growthKb + " KiB");
    assertTrue(growthKb < 64 * 1024, "RSS grew by " + growthKb + " KiB");
  }

  @Test
  void theCleanerFreesWhatWasNeverClosed() throws Exception {
    long baseline = Accelerate.liveHandles(HandleKind.HANDLE_TENSOR);
    for (int i = 0; i < 100_000; ++i) Tensor.of(new float[] {i}, 1);  // dropped without close
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (Accelerate.liveHandles(HandleKind.HANDLE_TENSOR) > baseline && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(20);
    }
    assertEquals(baseline, Accelerate.liveHandles(HandleKind.HANDLE_TENSOR));
  }
}

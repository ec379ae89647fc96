package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** save_state / load_state through Java: a resumed model has the saved weights again. */
class CheckpointTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  @Test
  void saveThenLoadRestoresTheWeights() throws Exception {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         Tensor w = model.parameter("0.weight")) {
      float[] saved = w.toFloatArray();
      String written = acc.saveState(dir.resolve("ckpt").toString());
      assertTrue(Files.isDirectory(Path.of(written)), written);
      try (Tensor zeros = Tensor.of(new float[saved.length], 1, saved.length);
           TensorList state = new TensorList()) {
        state.append("0.weight", zeros);
        model.loadStateDict(state, false);
      }
      assertArrayEquals(new float[saved.length], w.toFloatArray());
      acc.loadState(written);
      assertArrayEquals(saved, w.toFloatArray());
      assertThrows(AccelerateIOException.class, () -> acc.loadState(dir.resolve("missing").toString()));
      // An unsharded checkpoint holds full weights: nothing to merge (merge-weights).
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> Accelerator.mergeShardedCheckpoint(written, 0, dir.resolve("merged").toString(), ""));
      assertTrue(e.getMessage().contains("holds no model shards"), e.getMessage());
    }
  }
}

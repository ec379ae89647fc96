package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** torch's global CPU generator from Java (its state saved and restored, rand/randn drawn from it),
 *  and TorchScript models run without graph optimisation. */
class RandomTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":2}]";

  static float[] rand(long... shape) {
    try (Tensor t = Tensor.rand(shape)) {
      return t.toFloatArray();
    }
  }

  static float[] forward(Model model, Tensor x) {
    try (Tensor y = model.forwardNoGrad(x)) {
      return y.toFloatArray();
    }
  }

  @Test
  void restoringTheStateRepeatsTheDraws() {
    Accelerate.setSeed(42);
    try (Tensor state = Accelerate.getRandomState()) {
      assertEquals(DType.UINT8, state.dtype());
      assertEquals(1, state.ndim());
      float[] first = rand(3);
      for (float v : first) assertTrue(v >= 0 && v < 1, Arrays.toString(first));
      assertFalse(Arrays.equals(first, rand(3)), "the stream moves on");
      Accelerate.setRandomState(state);
      assertArrayEquals(first, rand(3));
      Accelerate.setSeed(42);
      assertArrayEquals(first, rand(3));
      // Device-specific on one process (index 0): the same seed.
      Accelerate.setSeedWith(42, true, false);
      assertArrayEquals(first, rand(3));
    }
  }

  @Test
  void randnIsFloat32OnTheCpuInTheShapeAsked() {
    try (Tensor t = Tensor.randn(2, 3)) {
      assertArrayEquals(new long[] {2, 3}, t.shape());
      assertEquals(DType.FLOAT32, t.dtype());
      assertEquals("cpu", t.device());
    }
    assertThrows(InvalidArgumentException.class, () -> Tensor.randn(2, -1));
  }

  @Test
  void aTensorThatIsNotAStateIsRefusedAndChangesNothing() {
    try (Tensor state = Accelerate.getRandomState();
         Tensor floats = Tensor.zeros(new long[] {state.numel()}, DType.FLOAT32, "");
         Tensor threeBytes = Tensor.of(new byte[3], 3)) {
      for (Tensor bad : new Tensor[] {floats, threeBytes}) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Accelerate.setRandomState(bad));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
      }
      assertThrows(InvalidHandleException.class, () -> Accelerate.setRandomState(null));
      float[] next = rand(3);
      Accelerate.setRandomState(state);
      assertArrayEquals(next, rand(3));
    }
  }

  @Test
  void withoutGraphOptimisationTorchScriptGivesTheEagerNumbers() throws Exception {
    String file = dir.resolve("model.pt").toString();
    try (Model spec = Model.fromSpec(SPEC); Tensor x = Tensor.rand(3, 4)) {
      float[] eager = forward(spec, x);
      spec.setGraphOptimization(false);  // a layer-spec model always runs eagerly: accepted, no effect
      assertArrayEquals(eager, forward(spec, x));
      spec.saveTorchscript(file);
      try (Model script = Model.loadTorchscript(file)) {
        script.setGraphOptimization(false);
        for (int i = 0; i < 3; ++i) assertArrayEquals(eager, forward(script, x));  // past the JIT's profiling runs
        script.close();
        assertThrows(InvalidHandleException.class, () -> script.setGraphOptimization(true));
      }
    }
  }
}

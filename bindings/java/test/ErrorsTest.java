package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import org.junit.jupiter.api.Test;

/** Failures arrive as the AccelerateException subclass of their status, with the library's message. */
class ErrorsTest {
  @Test
  void unknownOptionKeyIsInvalidArgumentNamingTheKey() {
    try (Options o = Options.optimizer()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> o.setInt("no_such_key", 1));
      assertTrue(e.getMessage().contains("no_such_key"), e.getMessage());
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e instanceof AccelerateException);
    }
  }

  @Test
  void textOutsideTheBmpCrossesBothWaysAndNulIsRefused() {
    String key = "cl\u00e9 \ud83d\ude00";  // a character outside the BMP: a surrogate pair in Java
    try (Options o = Options.optimizer()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> o.setInt(key, 1));
      assertTrue(e.getMessage().contains(key), e.getMessage());
      InvalidArgumentException nul = assertThrows(InvalidArgumentException.class, () -> o.setDouble("lr\0x", 0.1));
      assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
      o.setDouble("lr", 0.1);
    }
  }

  /** Found by a hunt: a lone surrogate became '?' on the way, so a metric or key reached the library
   *  under another name; it is refused, in plain string arguments and in names passed together. */
  @Test
  void aLoneSurrogateIsRefusedNotReplaced() {
    try (Options o = Options.optimizer(); Accelerator acc = new Accelerator(null)) {
      InvalidArgumentException key = assertThrows(InvalidArgumentException.class, () -> o.setInt("lr\ud800", 1));
      assertTrue(key.getMessage().contains("lone UTF-16 surrogate (U+D800 at index 2)"), key.getMessage());
      InvalidArgumentException name =
          assertThrows(InvalidArgumentException.class, () -> acc.log(java.util.Map.of("a\udc00b", 1.0), 1));
      assertTrue(name.getMessage().contains("lone UTF-16 surrogate (U+DC00 at index 1)"), name.getMessage());
      // A pair is a character: it passes, to the library's own answer (no trackers here).
      assertThrows(NotInitializedException.class, () -> acc.log(java.util.Map.of("a\ud83d\ude00b", 1.0), 1));
    }
  }

  /** Found by a hunt: a null metric value was a bare NullPointerException from inside the binding,
   *  and a load report's index past the end an InternalException ("a bug") with libstdc++'s text. */
  @Test
  void nullValuesAndIndicesPastTheEndAreInvalidArguments() {
    try (Accelerator acc = new Accelerator(null)) {
      java.util.Map<String, Double> values = new java.util.HashMap<>();
      values.put("loss", null);
      InvalidArgumentException value = assertThrows(InvalidArgumentException.class, () -> acc.log(values, 1));
      assertTrue(value.getMessage().contains("the value of 'loss' is null"), value.getMessage());
      assertThrows(InvalidArgumentException.class, () -> acc.logScalars("group", values, 1));
    }
    try (Model m = Model.fromSpec(FreezeTest.SPEC); TensorList state = m.stateDict()) {
      String file = System.getProperty("java.io.tmpdir") + "/errors_test_report.safetensors";
      state.saveSafetensors(file);
      try (LoadReport report = m.loadSafetensors(file, true)) {
        assertEquals(0, report.missingCount());
        InvalidArgumentException past = assertThrows(InvalidArgumentException.class, () -> report.missing(5));
        assertTrue(past.getMessage().contains("index 5 is out of range (the list has 0 items)"), past.getMessage());
        assertThrows(InvalidArgumentException.class, () -> report.unexpected(0));
      }
    }
  }

  @Test
  void missingFileIsIo() {
    AccelerateIOException e = assertThrows(AccelerateIOException.class, () -> Tensor.fromIdxFile("/nonexistent/x.idx"));
    assertTrue(e.getMessage().contains("/nonexistent/x.idx"), e.getMessage());
  }

  // A negative offset is refused by its own value, not mapped as 2^64 - 1 (found by a hunt).
  @Test
  void negativeMmapOffsetIsInvalidArgument() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> Tensor.fromFileMmap("/nonexistent/x.bin", -1, DType.FLOAT32, new long[] {-1}));
    assertTrue(e.getMessage().contains("offset is negative: -1"), e.getMessage());
  }

  @Test
  void shapeMismatchIsInvalidArgument() {
    try (Tensor logits = Tensor.of(new float[6], 2, 3); Tensor target = Tensor.of(new long[3], 3)) {
      assertThrows(InvalidArgumentException.class, () -> Loss.crossEntropy(logits, target, Reduction.MEAN, 0.0));
    }
  }

  @Test
  void regressionLossesGiveTorchsValues() {  // F.l1_loss, F.smooth_l1_loss, F.huber_loss (torch 1.13)
    try (Tensor x = Tensor.of(new float[] {0.5f, -1f, 2f, 0.1f}, 4);
         Tensor y = Tensor.of(new float[] {0f, 0.5f, -1f, 0.1f}, 4);
         Tensor l1 = Loss.l1(x, y, Reduction.MEAN);
         Tensor smooth = Loss.smoothL1(x, y, Reduction.SUM, 2.0);
         Tensor huber = Loss.huber(x, y, Reduction.SUM, 2.0)) {
      assertEquals(1.25, l1.item());
      assertEquals(2.625, smooth.item());
      assertEquals(5.25, huber.item());
      assertThrows(InvalidArgumentException.class, () -> Loss.huber(x, y, Reduction.MEAN, 0.0));
    }
  }

  @Test
  void wrongElementCountIsInvalidArgument() {
    assertThrows(InvalidArgumentException.class, () -> Tensor.of(new float[5], 2, 3));
  }

  @Test
  void aFailureLeavesTheLibraryUsable() {
    try (Tensor t = Tensor.of(new float[] {1, 2}, 2)) {
      assertThrows(AccelerateException.class, () -> t.backward());  // not a scalar, no history
      try (Tensor s = t.sum()) {
        assertEquals(3.0, s.item());
      }
    }
  }

  @Test
  void abiMismatchNamesBothVersions() {
    VersionMismatchException e = assertThrows(VersionMismatchException.class, () -> Accelerate.checkAbi(999));
    assertTrue(e.getMessage().contains("999"), e.getMessage());
    assertTrue(e.getMessage().contains(String.valueOf(Accelerate.abiVersion())), e.getMessage());
    Accelerate.checkAbi(Accelerate.abiVersion());
  }

  @Test
  void wrongDtypeCopyIsRefused() {
    try (Tensor t = Tensor.of(new long[] {1, 2}, 2)) {
      assertThrows(InvalidArgumentException.class, () -> t.toFloatArray());
      assertArrayEquals(new long[] {1, 2}, t.toLongArray());
    }
  }
}

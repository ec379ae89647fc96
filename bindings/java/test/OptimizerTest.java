package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The optimizers chosen by name: each one trains, and Adafactor's relative step has no lr. */
class OptimizerTest {
  @Test
  void everyAlgorithmTrains() {
    for (String algorithm : new String[] {"rmsprop", "adagrad", "lion", "adafactor"}) {
      try (Model model = Model.fromSpec(FreezeTest.SPEC); Optimizer opt = new Optimizer(model, algorithm, null)) {
        float[] before = FreezeTest.param(model, "0.weight");
        FreezeTest.trainStep(model, opt);
        assertFalse(Arrays.equals(before, FreezeTest.param(model, "0.weight")), algorithm);
      }
    }
  }

  @Test
  void aParametersStateIsReadByName() {
    try (Model model = Model.fromSpec(FreezeTest.SPEC); Optimizer opt = new Optimizer(model, "asgd", null)) {
      assertThrows(NotInitializedException.class, () -> opt.stateOf("0.weight", "ax"));
      FreezeTest.trainStep(model, opt);
      try (StringList fields = opt.stateFields("0.weight")) {
        assertEquals(Arrays.asList("ax", "eta", "mu", "step"), fields.toList());
      }
      try (Tensor ax = opt.stateOf("0.weight", "ax")) {  // before t0, the latest weights
        assertArrayEquals(FreezeTest.param(model, "0.weight"), ax.toFloatArray());
      }
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> opt.stateOf("0.weight", "sum"));
      assertTrue(e.getMessage().contains("it keeps ax, eta, mu, step"), e.getMessage());
    }
  }

  @Test
  void adafactorWithARelativeStepHasNoLearningRate() {
    try (Model model = Model.fromSpec(FreezeTest.SPEC); Optimizer opt = new Optimizer(model, "adafactor", null)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> opt.getLr(0));
      assertTrue(e.getMessage().contains("relative_step"), e.getMessage());
    }
    try (Model model = Model.fromSpec(FreezeTest.SPEC);
         Options o = Options.optimizer().put("lr", 0.01)) {
      assertThrows(InvalidArgumentException.class, () -> new Optimizer(model, "adafactor", o));
      o.put("relative_step", false);
      try (Optimizer opt = new Optimizer(model, "adafactor", o)) {
        assertEquals(0.01, opt.getLr(0));
      }
    }
  }
}

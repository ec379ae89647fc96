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

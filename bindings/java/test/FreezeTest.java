package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Parameters frozen by name patterns (Model.setRequiresGrad) and optimizer groups chosen by them
 *  (Optimizer.addParamGroupMatching). */
class FreezeTest {
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":3},"
      + "{\"type\":\"linear\",\"in_features\":3,\"out_features\":2}]";

  static float[] param(Model model, String name) {
    try (Tensor p = model.parameter(name)) {
      return p.toFloatArray();
    }
  }

  /** One step on the MSE loss of a fixed batch. */
  static void trainStep(Model model, Optimizer opt) {
    try (Tensor x = Tensor.of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4);
         Tensor target = Tensor.of(new float[] {1, 0, 0, 1}, 2, 2);
         Tensor y = model.forward(x);
         Tensor loss = Loss.mse(y, target, Reduction.MEAN)) {
      loss.backward();
      opt.step();
    }
  }

  @Test
  void frozenParametersAreNotUpdated() {
    try (Model model = Model.fromSpec(SPEC)) {
      assertEquals(2, model.setRequiresGrad("0.*", false));
      float[] w0 = param(model, "0.weight"), w1 = param(model, "1.weight");
      try (Optimizer opt = new Optimizer(model, "sgd", null)) {
        trainStep(model, opt);
      }
      assertArrayEquals(w0, param(model, "0.weight"));
      assertFalse(Arrays.equals(w1, param(model, "1.weight")));
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> model.setRequiresGrad("encoder.*", false));
      assertTrue(e.getMessage().contains("encoder.*"), e.getMessage());
      assertEquals(2, model.setRequiresGrad("0.*", true));
      try (Tensor w = model.parameter("0.weight")) {
        assertTrue(w.requiresGrad());
      }
    }
  }

  @Test
  void aPreparedModelIsRefused() {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model model = Model.fromSpec(SPEC);
         Model prepared = acc.prepare(model)) {
      assertThrows(InvalidArgumentException.class, () -> prepared.setRequiresGrad("0.*", false));
    }
  }

  @Test
  void matchingTrainableParametersMoveIntoANewGroup() {
    try (Model model = Model.fromSpec(SPEC)) {
      model.setRequiresGrad("0.*", false);
      try (Optimizer opt = new Optimizer(model, "sgd", null); Options overrides = Options.optimizer().put("lr", 0.5)) {
        assertEquals(1, opt.addParamGroupMatching("*.bias", overrides));  // 0.bias is frozen
        assertEquals(2, opt.numParamGroups());
        assertEquals(0.5, opt.getLr(1));
        assertThrows(InvalidArgumentException.class, () -> opt.addParamGroupMatching("nothing.*", null));
      }
    }
  }
}

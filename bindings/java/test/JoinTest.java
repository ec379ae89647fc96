package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import org.junit.jupiter.api.Test;

/** joinUnevenInputs as a try-with-resources scope (on one process it changes nothing). */
class JoinTest {
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  @Test
  void joinIsAScopeForPreparedModels() {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         Model other = Model.fromSpec(SPEC)) {
      try (Scope join = acc.joinUnevenInputs(model);
           Tensor x = Tensor.of(new float[] {1, 2}, 1, 2);
           Tensor y = model.forward(x)) {
        assertEquals(2, y.shape().length);
      }
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> acc.joinUnevenInputs(other));
      assertTrue(e.getMessage().contains("not prepared"), e.getMessage());
    }
  }
}

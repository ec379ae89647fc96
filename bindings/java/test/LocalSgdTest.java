package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import org.junit.jupiter.api.Test;

/** localSgd as a try-with-resources scope with step() (on one process it only counts steps). */
class LocalSgdTest {
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  @Test
  void localSgdIsAScopeWithStepsForPreparedModels() {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         Model other = Model.fromSpec(SPEC)) {
      LocalSgd closed;
      try (LocalSgd local = acc.localSgd(model, 2)) {
        for (int i = 0; i < 3; ++i) local.step();
        closed = local;
      }
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, closed::step);
      assertTrue(e.getMessage().contains("without local_sgd_begin"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> acc.localSgd(other, 2));
      assertTrue(e.getMessage().contains("not prepared"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> acc.localSgd(model, 0, true));
      assertTrue(e.getMessage().contains("local_sgd_steps must be >= 1"), e.getMessage());
    }
  }
}

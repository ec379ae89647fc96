package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import org.junit.jupiter.api.Test;

/** Closing is idempotent (AutoCloseable's contract); using a closed object throws, never crashes;
 *  parents may be closed before their children. */
class LifetimeTest {
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  @Test
  void closeTwiceIsHarmless() {
    Tensor t = Tensor.of(new float[] {1}, 1);
    t.close();
    t.close();
    assertTrue(t.isClosed());
  }

  @Test
  void usingAClosedObjectThrows() {
    Tensor t = Tensor.of(new float[] {1, 2}, 2);
    t.close();
    // Named as closed, not as a null argument (found by a hunt: "t is NULL").
    InvalidHandleException numel = assertThrows(InvalidHandleException.class, t::numel);
    assertTrue(numel.getMessage().contains("this Tensor is closed"), numel.getMessage());
    assertThrows(InvalidHandleException.class, t::toFloatArray);
    try (Tensor other = Tensor.of(new float[] {1, 2}, 2)) {
      InvalidHandleException passed = assertThrows(InvalidHandleException.class, () -> other.countEqual(t));
      assertTrue(passed.getMessage().contains("a closed Tensor was passed"), passed.getMessage());
    }
    Model m = Model.fromSpec(SPEC);
    m.close();
    InvalidHandleException model = assertThrows(InvalidHandleException.class, () -> new Optimizer(m, "sgd", null));
    assertTrue(model.getMessage().contains("a closed Model was passed"), model.getMessage());
  }

  @Test
  void childrenOutliveTheirParents() {
    Model model = Model.fromSpec(SPEC);
    Optimizer opt = new Optimizer(model, "sgd", null);
    Scheduler sched = new Scheduler(opt, "constant", null);
    model.close();
    opt.close();
    sched.step();
    assertEquals(1, sched.getStep());
    sched.close();
  }

  @Test
  void plateauSchedulerStepsWithAMetric() {
    try (Model model = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 1.0);
         Optimizer opt = new Optimizer(model, "sgd", oo);
         Options so = Options.scheduler().put("patience", 0).put("factor", 0.5);
         Scheduler sched = new Scheduler(opt, "reduce_lr_on_plateau", so)) {
      sched.stepMetric(2.0);
      sched.stepMetric(3.0);
      assertEquals(0.5, sched.getLastLr(0));
      assertThrows(InvalidArgumentException.class, sched::step);
    }
  }

  @Test
  void aSequenceHandsOverAtItsMilestone() {
    try (Model model = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 1.0);
         Optimizer opt = new Optimizer(model, "sgd", oo);
         Options lo = Options.scheduler().put("start_factor", 0.5).put("total_iters", 2);
         Options eo = Options.scheduler().put("gamma", 0.5);
         Scheduler sched = new Scheduler(opt, "linear_lr", lo)) {
      sched.then(2, "exponential", eo);
      assertEquals(0.5, sched.getLastLr(0));
      sched.step();
      sched.step();
      assertEquals(1.0, sched.getLastLr(0));  // exponential from the base rate
      sched.step();
      assertEquals(0.5, sched.getLastLr(0));
      assertThrows(InvalidArgumentException.class, () -> sched.then(5, "constant", null));
    }
  }

  @Test
  void scopesEndOnce() {
    try (Options o = Options.accelerator().put("cpu", true).put("gradient_accumulation_steps", 2);
         Accelerator acc = new Accelerator(o)) {
      Scope s = acc.accumulate();
      assertFalse(acc.syncGradients());
      s.close();
      s.close();
      try (Scope second = acc.accumulate()) {
        assertTrue(acc.syncGradients());
      }
      try (Scope first = acc.mainProcessFirst()) {
        assertTrue(acc.isMainProcess());
      }
    }
  }
}

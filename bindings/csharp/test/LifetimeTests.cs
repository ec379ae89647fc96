// Dispose is idempotent (IDisposable's contract); using a disposed object throws, never crashes;
// parents may be disposed before their children; scopes end once.
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class LifetimeTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  [Test]
  public void DisposeTwiceIsHarmless() {
    Tensor t = Tensor.Of(new float[] {1}, 1);
    t.Dispose();
    t.Dispose();
    Assert.Throws<AccelerateInvalidHandleException>(() => { long n = t.Numel; });
  }

  [Test]
  public void UsingADisposedObjectThrows() {
    Tensor t = Tensor.Of(new float[] {1, 2}, 2);
    t.Dispose();
    // Named as disposed, not as a null argument (found by a hunt: "t is NULL").
    var numel = Assert.Throws<AccelerateInvalidHandleException>(() => { long n = t.Numel; });
    StringAssert.Contains("this Tensor is disposed", numel.Message);
    Assert.Throws<AccelerateInvalidHandleException>(() => t.ToFloatArray());
    using (Tensor other = Tensor.Of(new float[] {1, 2}, 2)) {
      var passed = Assert.Throws<AccelerateInvalidHandleException>(() => other.CountEqual(t));
      StringAssert.Contains("a disposed Tensor was passed", passed.Message);
    }
    Model m = Model.FromSpec(Spec);
    m.Dispose();
    var model = Assert.Throws<AccelerateInvalidHandleException>(() => new Optimizer(m, "sgd", null));
    StringAssert.Contains("a disposed Model was passed", model.Message);
    var acc = new Accelerator(null);
    acc.Dispose();
    Assert.Throws<AccelerateInvalidHandleException>(() => acc.Accumulate());
    Assert.Throws<AccelerateInvalidHandleException>(() => acc.SaveState(""));
  }

  [Test]
  public void ChildrenOutliveTheirParents() {
    Model model = Model.FromSpec(Spec);
    var opt = new Optimizer(model, "sgd", null);
    var sched = new Scheduler(opt, "constant", null);
    model.Dispose();
    opt.Dispose();
    sched.Step();
    Assert.AreEqual(1, sched.GetStep());
    sched.Dispose();
  }

  [Test]
  public void PlateauSchedulerStepsWithAMetric() {
    using (Model model = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 1.0))
    using (var opt = new Optimizer(model, "sgd", oo))
    using (Options so = Options.Scheduler().Put("patience", 0).Put("factor", 0.5))
    using (var sched = new Scheduler(opt, "reduce_lr_on_plateau", so)) {
      sched.StepMetric(2.0);
      sched.StepMetric(3.0);
      Assert.AreEqual(0.5, sched.GetLastLr(0));
      Assert.Throws<AccelerateInvalidArgumentException>(() => sched.Step());
    }
  }

  [Test]
  public void ASequenceHandsOverAtItsMilestone() {
    using (Model model = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 1.0))
    using (var opt = new Optimizer(model, "sgd", oo))
    using (Options lo = Options.Scheduler().Put("start_factor", 0.5).Put("total_iters", 2))
    using (Options eo = Options.Scheduler().Put("gamma", 0.5))
    using (var sched = new Scheduler(opt, "linear_lr", lo)) {
      sched.Then(2, "exponential", eo);
      Assert.AreEqual(0.5, sched.GetLastLr(0));
      sched.Step();
      sched.Step();
      Assert.AreEqual(1.0, sched.GetLastLr(0));  // exponential from the base rate
      sched.Step();
      Assert.AreEqual(0.5, sched.GetLastLr(0));
      Assert.Throws<AccelerateInvalidArgumentException>(() => sched.Then(5, "constant", null));
    }
  }

  [Test]
  public void ScopesEndOnce() {
    using (Options o = Options.Accelerator().Put("cpu", true).Put("gradient_accumulation_steps", 2))
    using (var acc = new Accelerator(o)) {
      Scope s = acc.Accumulate();
      Assert.IsFalse(acc.SyncGradients);
      s.Dispose();
      s.Dispose();
      using (acc.Accumulate()) Assert.IsTrue(acc.SyncGradients);
      using (acc.MainProcessFirst()) Assert.IsTrue(acc.IsMainProcess);
    }
  }
}

}

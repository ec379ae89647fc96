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
    Assert.Throws<AccelerateInvalidHandleException>(() => { long n = t.Numel; });
    Assert.Throws<AccelerateInvalidHandleException>(() => t.ToFloatArray());
    using (Tensor other = Tensor.Of(new float[] {1, 2}, 2))
      Assert.Throws<AccelerateInvalidHandleException>(() => other.CountEqual(t));
    Model m = Model.FromSpec(Spec);
    m.Dispose();
    Assert.Throws<AccelerateInvalidHandleException>(() => new Optimizer(m, "sgd", null));
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

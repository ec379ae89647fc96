// LocalSgd as a `using` scope with Step() (on one process it only counts steps).
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class LocalSgdTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  [Test]
  public void LocalSgdIsAScopeWithStepsForPreparedModels() {
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (Model other = Model.FromSpec(Spec)) {
      LocalSgd closed;
      using (var local = acc.LocalSgd(model, 2)) {
        for (int i = 0; i < 3; ++i) local.Step();
        closed = local;
      }
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => closed.Step());
      StringAssert.Contains("without local_sgd_begin", e.Message);
      e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.LocalSgd(other, 2));
      StringAssert.Contains("not prepared", e.Message);
      e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.LocalSgd(model, 0));
      StringAssert.Contains("local_sgd_steps must be >= 1", e.Message);
    }
  }
}

}

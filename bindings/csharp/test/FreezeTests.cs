// Parameters frozen by name patterns (Model.SetRequiresGrad) and optimizer groups chosen by them
// (Optimizer.AddParamGroupMatching).
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class FreezeTests {
  internal const string Spec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":3},"
      + "{\"type\":\"linear\",\"in_features\":3,\"out_features\":2}]";

  internal static float[] Param(Model model, string name) {
    using (Tensor p = model.Parameter(name)) return p.ToFloatArray();
  }

  /// One step on the MSE loss of a fixed batch.
  internal static void TrainStep(Model model, Optimizer opt) {
    using (Tensor x = Tensor.Of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4))
    using (Tensor target = Tensor.Of(new float[] {1, 0, 0, 1}, 2, 2))
    using (Tensor y = model.Forward(x))
    using (Tensor loss = Loss.Mse(y, target, Reduction.Mean)) {
      loss.Backward();
      opt.Step();
    }
  }

  [Test]
  public void FrozenParametersAreNotUpdated() {
    using (Model model = Model.FromSpec(Spec)) {
      Assert.AreEqual(2, model.SetRequiresGrad("0.*", false));
      float[] w0 = Param(model, "0.weight"), w1 = Param(model, "1.weight");
      using (var opt = new Optimizer(model, "sgd", null)) TrainStep(model, opt);
      Assert.AreEqual(w0, Param(model, "0.weight"));
      CollectionAssert.AreNotEqual(w1, Param(model, "1.weight"));
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.SetRequiresGrad("encoder.*", false));
      StringAssert.Contains("encoder.*", e.Message);
      Assert.AreEqual(2, model.SetRequiresGrad("0.*", true));
      using (Tensor w = model.Parameter("0.weight")) Assert.IsTrue(w.RequiresGrad);
    }
  }

  [Test]
  public void APreparedModelIsRefused() {
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model model = Model.FromSpec(Spec))
    using (Model prepared = acc.Prepare(model))
      Assert.Throws<AccelerateInvalidArgumentException>(() => prepared.SetRequiresGrad("0.*", false));
  }

  [Test]
  public void MatchingTrainableParametersMoveIntoANewGroup() {
    using (Model model = Model.FromSpec(Spec)) {
      model.SetRequiresGrad("0.*", false);
      using (var opt = new Optimizer(model, "sgd", null))
      using (Options overrides = Options.Optimizer().Put("lr", 0.5)) {
        Assert.AreEqual(1, opt.AddParamGroupMatching("*.bias", overrides));  // 0.bias is frozen
        Assert.AreEqual(2, opt.NumParamGroups);
        Assert.AreEqual(0.5, opt.GetLr(1));
        Assert.Throws<AccelerateInvalidArgumentException>(() => opt.AddParamGroupMatching("nothing.*", null));
      }
    }
  }
}

}

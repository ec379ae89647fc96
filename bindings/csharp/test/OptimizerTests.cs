// The optimizers chosen by name: each one trains, and Adafactor's relative step has no lr.
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class OptimizerTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":3},"
      + "{\"type\":\"linear\",\"in_features\":3,\"out_features\":2}]";

  static float[] Param(Model model, string name) {
    using (Tensor p = model.Parameter(name)) return p.ToFloatArray();
  }

  [Test]
  public void EveryAlgorithmTrains() {
    foreach (string algorithm in new[] {"rmsprop", "adagrad", "lion", "adafactor"}) {
      using (Model model = Model.FromSpec(Spec))
      using (var opt = new Optimizer(model, algorithm, null)) {
        float[] before = Param(model, "0.weight");
        FreezeTests.TrainStep(model, opt);
        Assert.AreNotEqual(before, Param(model, "0.weight"), algorithm);
      }
    }
  }

  [Test]
  public void AParametersStateIsReadByName() {
    using (Model model = Model.FromSpec(Spec))
    using (var opt = new Optimizer(model, "asgd", null)) {
      Assert.Throws<AccelerateNotInitializedException>(() => opt.StateOf("0.weight", "ax"));
      FreezeTests.TrainStep(model, opt);
      using (StringList fields = opt.StateFields("0.weight"))
        Assert.AreEqual(new[] {"ax", "eta", "mu", "step"}, fields.ToList());
      using (Tensor ax = opt.StateOf("0.weight", "ax"))  // before t0, the latest weights
        Assert.AreEqual(Param(model, "0.weight"), ax.ToFloatArray());
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => opt.StateOf("0.weight", "sum"));
      StringAssert.Contains("it keeps ax, eta, mu, step", e.Message);
    }
  }

  [Test]
  public void AdafactorWithARelativeStepHasNoLearningRate() {
    using (Model model = Model.FromSpec(Spec)) {
      using (var opt = new Optimizer(model, "adafactor", null)) {
        var e = Assert.Throws<AccelerateInvalidArgumentException>(() => opt.GetLr(0));
        StringAssert.Contains("relative_step", e.Message);
      }
      using (Options o = Options.Optimizer().Put("lr", 0.01)) {
        Assert.Throws<AccelerateInvalidArgumentException>(() => new Optimizer(model, "adafactor", o));
        o.Put("relative_step", false);
        using (var opt = new Optimizer(model, "adafactor", o)) Assert.AreEqual(0.01, opt.GetLr(0));
      }
    }
  }
}

}  // namespace Accelerate.Tests

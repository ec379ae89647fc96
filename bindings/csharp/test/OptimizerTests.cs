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

  static void TrainStep(Model model, Optimizer opt) {
    using (Tensor x = Tensor.Of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4))
    using (Tensor target = Tensor.Of(new float[] {1, 0, 0, 1}, 2, 2))
    using (Tensor y = model.Forward(x))
    using (Tensor loss = Loss.Mse(y, target, Reduction.Mean)) {
      loss.Backward();
      opt.Step();
    }
  }

  [Test]
  public void EveryAlgorithmTrains() {
    foreach (string algorithm in new[] {"rmsprop", "adagrad", "lion", "adafactor"}) {
      using (Model model = Model.FromSpec(Spec))
      using (var opt = new Optimizer(model, algorithm, null)) {
        float[] before = Param(model, "0.weight");
        TrainStep(model, opt);
        Assert.AreNotEqual(before, Param(model, "0.weight"), algorithm);
      }
    }
  }

  [Test]
  public void AParametersStateIsReadByName() {
    using (Model model = Model.FromSpec(Spec))
    using (var opt = new Optimizer(model, "asgd", null)) {
      Assert.Throws<AccelerateNotInitializedException>(() => opt.StateOf("0.weight", "ax"));
      TrainStep(model, opt);
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

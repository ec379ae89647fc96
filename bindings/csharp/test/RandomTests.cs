// torch's global CPU generator from C# (its state saved and restored, Rand/Randn drawn from it), and
// TorchScript models run without graph optimisation.
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class RandomTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":2}]";

  static float[] Rand(params long[] shape) {
    using (Tensor t = Tensor.Rand(shape)) return t.ToFloatArray();
  }

  static float[] Forward(Model model, Tensor x) {
    using (Tensor y = model.ForwardNoGrad(x)) return y.ToFloatArray();
  }

  [Test]
  public void RestoringTheStateRepeatsTheDraws() {
    Library.SetSeed(42);
    using (Tensor state = Library.GetRandomState()) {
      Assert.AreEqual(DType.UInt8, state.DType);
      Assert.AreEqual(1, state.Ndim);
      float[] first = Rand(3);
      foreach (float v in first) Assert.That(v, Is.GreaterThanOrEqualTo(0f) & Is.LessThan(1f));
      CollectionAssert.AreNotEqual(first, Rand(3), "the stream moves on");
      Library.SetRandomState(state);
      Assert.AreEqual(first, Rand(3));
      Library.SetSeed(42);
      Assert.AreEqual(first, Rand(3));
      // Device-specific on one process (index 0): the same seed.
      Library.SetSeedWith(42, true, false);
      Assert.AreEqual(first, Rand(3));
    }
  }

  [Test]
  public void RandnIsFloat32OnTheCpuInTheShapeAsked() {
    using (Tensor t = Tensor.Randn(2, 3)) {
      Assert.AreEqual(new long[] {2, 3}, t.Shape());
      Assert.AreEqual(DType.Float32, t.DType);
      Assert.AreEqual("cpu", t.Device);
    }
    Assert.Throws<AccelerateInvalidArgumentException>(() => Tensor.Randn(2, -1));
  }

  [Test]
  public void ATensorThatIsNotAStateIsRefusedAndChangesNothing() {
    using (Tensor state = Library.GetRandomState())
    using (Tensor floats = Tensor.Zeros(DType.Float32, state.Numel))
    using (Tensor threeBytes = Tensor.Of(new byte[3], 3)) {
      foreach (Tensor bad in new[] {floats, threeBytes}) {
        var e = Assert.Throws<AccelerateInvalidArgumentException>(() => Library.SetRandomState(bad));
        Assert.AreEqual(Status.InvalidArgument, e.Status);
      }
      Assert.Throws<AccelerateInvalidHandleException>(() => Library.SetRandomState(null));
      float[] next = Rand(3);
      Library.SetRandomState(state);
      Assert.AreEqual(next, Rand(3));
    }
  }

  [Test]
  public void WithoutGraphOptimisationTorchScriptGivesTheEagerNumbers() {
    string file = Path.Combine(TestDirs.Temp(), "model.pt");
    using (Model spec = Model.FromSpec(Spec))
    using (Tensor x = Tensor.Rand(3, 4)) {
      float[] eager = Forward(spec, x);
      spec.SetGraphOptimization(false);  // a layer-spec model always runs eagerly: accepted, no effect
      Assert.AreEqual(eager, Forward(spec, x));
      spec.SaveTorchscript(file);
      using (Model script = Model.LoadTorchscript(file)) {
        script.SetGraphOptimization(false);
        for (int i = 0; i < 3; ++i) Assert.AreEqual(eager, Forward(script, x));  // past the JIT's profiling runs
        script.Dispose();
        Assert.Throws<AccelerateInvalidHandleException>(() => script.SetGraphOptimization(true));
      }
    }
  }
}

}

// Failures arrive as the AccelerateException type of their status, with the library's message.
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class ErrorsTests {
  [Test]
  public void UnknownOptionKeyIsInvalidArgumentNamingTheKey() {
    using (Options o = Options.Optimizer()) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => o.SetInt("no_such_key", 1));
      StringAssert.Contains("no_such_key", e.Message);
      Assert.AreEqual(Status.InvalidArgument, e.Status);
      Assert.IsInstanceOf<AccelerateException>(e);
    }
  }

  [Test]
  public void TextOutsideTheBmpCrossesBothWaysAndNulIsRefused() {
    const string key = "cl\u00e9 \U0001F600";
    using (Options o = Options.Optimizer()) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => o.SetInt(key, 1));
      StringAssert.Contains(key, e.Message);
      var nul = Assert.Throws<AccelerateInvalidArgumentException>(() => o.SetDouble("lr\0x", 0.1));
      StringAssert.Contains("NUL", nul.Message);
      o.SetDouble("lr", 0.1);
    }
  }

  // Found by a hunt: a lone surrogate became U+FFFD on the way (or an ArgumentException from the
  // marshaller), so a metric reached the library under another name; it is refused, in plain string
  // arguments and in names passed together.
  [Test]
  public void ALoneSurrogateIsRefusedNotReplaced() {
    using (Options o = Options.Optimizer())
    using (var acc = new Accelerator(null)) {
      var key = Assert.Throws<AccelerateInvalidArgumentException>(() => o.SetInt("lr\ud800", 1));
      StringAssert.Contains("lone UTF-16 surrogate (U+D800 at index 2)", key.Message);
      var name = Assert.Throws<AccelerateInvalidArgumentException>(
          () => acc.Log(new System.Collections.Generic.Dictionary<string, double> {{"a\udc00b", 1.0}}, 1));
      StringAssert.Contains("lone UTF-16 surrogate (U+DC00 at index 1)", name.Message);
      // A pair is a character: it passes, to the library's own answer (no trackers here).
      Assert.Throws<AccelerateNotInitializedException>(
          () => acc.Log(new System.Collections.Generic.Dictionary<string, double> {{"a\U0001F600b", 1.0}}, 1));
    }
  }

  [Test]
  public void ReshapeTakesItsCountFromTheArray() {
    using (Tensor t = Tensor.Of(new float[] {1, 2, 3, 4}, 4))
    using (Tensor r = t.Reshape(2, -1)) {
      CollectionAssert.AreEqual(new long[] {2, 2}, r.Shape());
      Assert.Throws<AccelerateInvalidArgumentException>(() => t.Reshape(3, -1));
    }
  }

  // A null array, list or dictionary is ArgumentNullException naming the parameter, before anything
  // reads it (not a NullReferenceException from inside the binding).
  [Test]
  public void NullArgumentsAreArgumentNullExceptionsNamingTheParameter() {
    Assert.AreEqual("data", Assert.Throws<System.ArgumentNullException>(() => Tensor.Of((float[])null, 2)).ParamName);
    Assert.AreEqual("shape", Assert.Throws<System.ArgumentNullException>(() => Tensor.Of(new float[] {1, 2}, (long[])null)).ParamName);
    Assert.AreEqual("data", Assert.Throws<System.ArgumentNullException>(() => Tensor.Of((byte[])null, 1)).ParamName);
    Assert.AreEqual("shape", Assert.Throws<System.ArgumentNullException>(() => Tensor.Randn((long[])null)).ParamName);
    Assert.AreEqual("shape", Assert.Throws<System.ArgumentNullException>(() => Tensor.Zeros(DType.Float32, (long[])null)).ParamName);
    Assert.AreEqual("tensors", Assert.Throws<System.ArgumentNullException>(() => TensorList.Of((Tensor[])null)).ParamName);
    using (Accelerator acc = new Accelerator(null)) {
      Assert.AreEqual("values", Assert.Throws<System.ArgumentNullException>(() => acc.Log(null, 0)).ParamName);
      Assert.AreEqual("data", Assert.Throws<System.ArgumentNullException>(() => acc.GatherObject(null)).ParamName);
    }
  }

  [Test]
  public void MissingFileIsIO() {
    var e = Assert.Throws<AccelerateIOException>(() => Tensor.FromIdxFile("/nonexistent/x.idx"));
    StringAssert.Contains("/nonexistent/x.idx", e.Message);
  }

  // A negative offset is refused by its own value, not mapped as 2^64 - 1 (found by a hunt).
  [Test]
  public void NegativeMmapOffsetIsInvalidArgument() {
    var e = Assert.Throws<AccelerateInvalidArgumentException>(
        () => Tensor.FromFileMmap("/nonexistent/x.bin", -1, DType.Float32, -1));
    StringAssert.Contains("offset is negative: -1", e.Message);
  }

  [Test]
  public void ShapeMismatchIsInvalidArgument() {
    using (Tensor logits = Tensor.Of(new float[6], 2, 3))
    using (Tensor target = Tensor.Of(new long[3], 3))
      Assert.Throws<AccelerateInvalidArgumentException>(() => Loss.CrossEntropy(logits, target, Reduction.Mean, 0.0));
  }

  [Test]
  public void RegressionLossesGiveTorchsValues() {  // F.l1_loss, F.smooth_l1_loss, F.huber_loss (torch 1.13)
    using (Tensor x = Tensor.Of(new float[] {0.5f, -1f, 2f, 0.1f}, 4))
    using (Tensor y = Tensor.Of(new float[] {0f, 0.5f, -1f, 0.1f}, 4))
    using (Tensor l1 = Loss.L1(x, y, Reduction.Mean))
    using (Tensor smooth = Loss.SmoothL1(x, y, Reduction.Sum, 2.0))
    using (Tensor huber = Loss.Huber(x, y, Reduction.Sum, 2.0)) {
      Assert.AreEqual(1.25, l1.Item());
      Assert.AreEqual(2.625, smooth.Item());
      Assert.AreEqual(5.25, huber.Item());
      Assert.Throws<AccelerateInvalidArgumentException>(() => Loss.Huber(x, y, Reduction.Mean, 0.0));
    }
  }

  [Test]
  public void WrongElementCountIsInvalidArgument() {
    Assert.Throws<AccelerateInvalidArgumentException>(() => Tensor.Of(new float[5], 2, 3));
  }

  [Test]
  public void AFailureLeavesTheLibraryUsable() {
    using (Tensor t = Tensor.Of(new float[] {1, 2}, 2)) {
      Assert.Throws(Is.InstanceOf<AccelerateException>(), () => t.Backward());  // not a scalar
      using (Tensor s = t.Sum()) Assert.AreEqual(3.0, s.Item());
    }
  }

  [Test]
  public void AbiMismatchNamesBothVersions() {
    var e = Assert.Throws<AccelerateVersionMismatchException>(() => Library.CheckAbi(999));
    StringAssert.Contains("999", e.Message);
    StringAssert.Contains(Library.AbiVersion().ToString(), e.Message);
    Library.CheckAbi(Library.AbiVersion());
    Assert.AreEqual(Native.ACC_ABI_VERSION, Library.AbiVersion());
  }

  [Test]
  public void WrongDtypeCopyIsRefused() {
    using (Tensor t = Tensor.Of(new long[] {1, 2}, 2)) {
      Assert.Throws<AccelerateInvalidArgumentException>(() => t.ToFloatArray());
      Assert.AreEqual(new long[] {1, 2}, t.ToLongArray());
    }
  }

  [Test]
  public void ExceptionTypesDoNotShadowSystemOnes() {
    Assert.IsFalse(typeof(System.TimeoutException).IsAssignableFrom(typeof(AccelerateTimeoutException)));
    Assert.AreEqual(Status.Timeout, new AccelerateTimeoutException("t").Status);
  }
}

}

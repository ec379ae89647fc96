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

  [Test]
  public void ReshapeTakesItsCountFromTheArray() {
    using (Tensor t = Tensor.Of(new float[] {1, 2, 3, 4}, 4))
    using (Tensor r = t.Reshape(2, -1)) {
      CollectionAssert.AreEqual(new long[] {2, 2}, r.Shape());
      Assert.Throws<AccelerateInvalidArgumentException>(() => t.Reshape(3, -1));
    }
  }

  [Test]
  public void MissingFileIsIO() {
    var e = Assert.Throws<AccelerateIOException>(() => Tensor.FromIdxFile("/nonexistent/x.idx"));
    StringAssert.Contains("/nonexistent/x.idx", e.Message);
  }

  [Test]
  public void ShapeMismatchIsInvalidArgument() {
    using (Tensor logits = Tensor.Of(new float[6], 2, 3))
    using (Tensor target = Tensor.Of(new long[3], 3))
      Assert.Throws<AccelerateInvalidArgumentException>(() => Loss.CrossEntropy(logits, target, Reduction.Mean, 0.0));
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

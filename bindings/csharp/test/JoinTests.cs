// JoinUnevenInputs as a `using` scope (on one process it changes nothing).
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class JoinTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  [Test]
  public void JoinIsAScopeForPreparedModels() {
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (Model other = Model.FromSpec(Spec)) {
      using (acc.JoinUnevenInputs(model))
      using (Tensor x = Tensor.Of(new float[] {1, 2}, 1, 2))
      using (Tensor y = model.Forward(x)) {
        Assert.AreEqual(2, y.Shape().Length);
      }
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.JoinUnevenInputs(other));
      StringAssert.Contains("not prepared", e.Message);
    }
  }
}

}

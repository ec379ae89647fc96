// save_state / load_state through C#: a resumed model has the saved weights again.
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class CheckpointTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  [Test]
  public void SaveThenLoadRestoresTheWeights() {
    string dir = TestDirs.Temp();
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (Tensor w = model.Parameter("0.weight")) {
      float[] saved = w.ToFloatArray();
      string written = acc.SaveState(Path.Combine(dir, "ckpt"));
      Assert.IsTrue(Directory.Exists(written), written);
      using (Tensor zeros = Tensor.Of(new float[saved.Length], 1, saved.Length))
      using (var state = new TensorList()) {
        state.Append("0.weight", zeros);
        model.LoadStateDict(state, false);
      }
      Assert.AreEqual(new float[saved.Length], w.ToFloatArray());
      acc.LoadState(written);
      Assert.AreEqual(saved, w.ToFloatArray());
      Assert.Throws<AccelerateIOException>(() => acc.LoadState(Path.Combine(dir, "missing")));
      // An unsharded checkpoint holds full weights: nothing to merge (merge-weights).
      var e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => Accelerator.MergeShardedCheckpoint(written, 0, Path.Combine(dir, "merged"), ""));
      StringAssert.Contains("holds no model shards", e.Message);
    }
  }
}

}

// Averaged models (PyTorch's AveragedModel): SWA's and EMA's averages of the trained weights, put
// into a model by Swap and CopyTo, moved by their state dict and kept by checkpoints.
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class AveragedModelTests {
  const string Spec = FreezeTests.Spec;
  const string OtherSpec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":5},"
      + "{\"type\":\"linear\",\"in_features\":5,\"out_features\":2}]";
  static readonly string[] Names = {"0.weight", "0.bias", "1.weight", "1.bias"};

  static float[] Param(Model model, string name) {
    using (Tensor p = model.Parameter(name)) return p.ToFloatArray();
  }

  static float[][] Weights(Model model) {
    var result = new float[Names.Length][];
    for (int i = 0; i < Names.Length; ++i) result[i] = Param(model, Names[i]);
    return result;
  }

  // The averages in the order of Names (the state dict names them "module.<name>").
  static float[][] Averages(AveragedModel avg) {
    using (TensorList state = avg.StateDict()) {
      var result = new float[Names.Length][];
      for (int i = 0; i < Names.Length; ++i)
        using (Tensor t = state.Find("module." + Names[i])) result[i] = t.ToFloatArray();
      return result;
    }
  }

  [Test]
  public void SwaAveragesTheTrainedWeightsAndPutsThemIntoAModel() {
    using (Model model = Model.FromSpec(Spec))
    using (var opt = new Optimizer(model, "sgd", null))
    using (var avg = new AveragedModel(model, null)) {
      Assert.AreEqual(0, avg.Count);
      var seen = new float[3][];
      for (int step = 0; step < 3; ++step) {
        FreezeTests.TrainStep(model, opt);
        avg.Update(model);
        seen[step] = Param(model, "1.bias");
      }
      Assert.AreEqual(3, avg.Count);
      float[][] averages = Averages(avg), trained = Weights(model);
      for (int i = 0; i < seen[0].Length; ++i)
        Assert.AreEqual((seen[0][i] + seen[1][i] + seen[2][i]) / 3, averages[3][i], 1e-6);
      Assert.AreNotEqual(trained, averages);

      avg.Swap(model);
      Assert.AreEqual(averages, Weights(model));
      Assert.AreEqual(trained, Averages(avg));
      avg.Swap(model);
      Assert.AreEqual(trained, Weights(model));
      Assert.AreEqual(averages, Averages(avg));

      using (Model evaluation = Model.FromSpec(Spec)) {
        avg.CopyTo(evaluation);
        Assert.AreEqual(averages, Weights(evaluation));
      }
      using (Model other = Model.FromSpec(OtherSpec)) {
        var e = Assert.Throws<AccelerateInvalidArgumentException>(() => avg.Update(other));
        StringAssert.Contains("'0.weight'", e.Message);
        Assert.Throws<AccelerateInvalidArgumentException>(() => avg.CopyTo(other));
      }
      Assert.AreEqual(3, avg.Count);
      Assert.AreEqual(averages, Averages(avg));
    }
  }

  [Test]
  public void EmaAveragesAreMovedByStateDictAndKeptByCheckpoints() {
    string dir = TestDirs.Temp();
    using (Options ao = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(ao))
    using (Model model = Model.FromSpec(Spec))
    using (var opt = new Optimizer(model, "sgd", null))
    using (Options o = Options.AveragedModel().Put("strategy", "ema").Put("decay", 0.5))
    using (var avg = new AveragedModel(model, o)) {
      acc.RegisterAveragedModel(avg);
      FreezeTests.TrainStep(model, opt);
      avg.Update(model);
      float[] first = Param(model, "0.weight");
      FreezeTests.TrainStep(model, opt);
      avg.Update(model);
      float[] second = Param(model, "0.weight");
      float[][] saved = Averages(avg);
      for (int i = 0; i < first.Length; ++i) Assert.AreEqual(0.5f * first[i] + 0.5f * second[i], saved[0][i], 1e-6);

      string written = acc.SaveState(Path.Combine(dir, "ckpt"));
      Assert.IsTrue(File.Exists(Path.Combine(written, "custom_checkpoint_0.safetensors")), written);
      FreezeTests.TrainStep(model, opt);
      avg.Update(model);
      Assert.AreEqual(3, avg.Count);
      acc.LoadState(written);
      Assert.AreEqual(2, avg.Count);
      Assert.AreEqual(saved, Averages(avg));

      using (var copy = new AveragedModel(model, o))
      using (TensorList state = avg.StateDict()) {
        copy.LoadStateDict(state);
        Assert.AreEqual(2, copy.Count);
        Assert.AreEqual(saved, Averages(copy));
      }
      using (Model other = Model.FromSpec(OtherSpec))
      using (var foreign = new AveragedModel(other, null))
      using (TensorList state = foreign.StateDict())
        Assert.Throws<AccelerateInvalidArgumentException>(() => avg.LoadStateDict(state));
      Assert.AreEqual(saved, Averages(avg));
    }
  }

  // update_bn: a BatchNorm layer's statistics become the plain average over the loader's epoch (two
  // equal batches: the mean of every sample), counted in num_batches_tracked.
  [Test]
  public void UpdateBnAveragesTheStatisticsOverAnEpoch() {
    float[] x = {1, 10, 3, 20, 5, 30, 7, 40, 2, 50, 4, 60, 6, 70, 8, 80};
    using (Model model = Model.FromSpec("[{\"type\":\"batchnorm1d\",\"num_features\":2}]"))
    using (Tensor t = Tensor.Of(x, 8, 2))
    using (TensorList fields = TensorList.Of(t))
    using (Dataset ds = Dataset.FromTensors(fields))
    using (Options o = Options.DataLoader().Put("batch_size", 4))
    using (DataLoader dl = new DataLoader(ds, o)) {
      model.UpdateBn(dl);
      using (TensorList state = model.StateDict())
      using (Tensor mean = state.Find("0.running_mean"))
      using (Tensor count = state.Find("0.num_batches_tracked")) {
        float[] m = mean.ToFloatArray();
        Assert.AreEqual(4.5f, m[0], 1e-5f);
        Assert.AreEqual(45f, m[1], 1e-5f);
        CollectionAssert.AreEqual(new long[] {2}, count.ToLongArray());
      }
    }
  }
}

}  // namespace Accelerate.Tests

// Checkpoint state, pre-hooks, program trackers and LR lambdas written as C# delegates: each is
// called as the C API documents, an exception comes back as AccelerateIOException with its
// message, and every delegate is released with its owner.
using System;
using System.Collections.Generic;
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class StateCallbackTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  static Accelerator NewAccelerator(string projectDir) {
    using (Options o = Options.Accelerator().Put("cpu", true).Put("project_dir", projectDir)) return new Accelerator(o);
  }

  [Test]
  public void CustomStateAndHooksGoThroughSaveAndLoad() {
    long baseline = Library.LiveCallbacks();
    string dir = TestDirs.Temp();
    var hooks = new List<string>();
    byte[] state = {1, 2, 3};
    byte[] loaded = null;
    using (Accelerator acc = NewAccelerator(dir)) {
      acc.RegisterForCheckpointing(() => state, bytes => loaded = bytes);
      acc.RegisterSaveStatePreHook(d => hooks.Add("save " + d));
      acc.RegisterLoadStatePreHook(d => hooks.Add("load " + d));
      Assert.AreEqual(baseline + 3, Library.LiveCallbacks());
      Assert.AreEqual(0, acc.Iteration);
      string written = acc.SaveState(Path.Combine(dir, "ckpt"));
      Assert.AreEqual(1, acc.Iteration);
      state = new byte[] {9};
      acc.LoadState(written);
      Assert.AreEqual(new byte[] {1, 2, 3}, loaded);
      Assert.AreEqual(new[] {"save " + written, "load " + written}, hooks.ToArray());
    }
    Assert.AreEqual(baseline, Library.LiveCallbacks());
  }

  [Test]
  public void HooksWithTheirModelsSaveAndLoadAModelThemselves() {
    long baseline = Library.LiveCallbacks();
    string dir = TestDirs.Temp();
    var seen = new List<long>();
    CheckpointModels kept = null;
    using (Accelerator acc = NewAccelerator(dir))
    using (Model raw0 = Model.FromSpec(Spec))
    using (Model raw1 = Model.FromSpec(Spec))
    using (Model first = acc.Prepare(raw0))
    using (Model second = acc.Prepare(raw1)) {
      acc.RegisterSaveStatePreHook((models, d) => {
        kept = models;
        for (int i = 0; i < models.Count; ++i) seen.Add(models.Index(i));
        using (Model m = models.Get(0))
        using (TensorList state = m.StateDict()) state.SaveSafetensors(Path.Combine(d, "own.safetensors"));
        models.Remove(0);  // Accelerate's weights.pop(0)
      });
      acc.RegisterLoadStatePreHook((models, d) => {
        using (Model m = models.Get(0)) m.LoadSafetensors(Path.Combine(d, "own.safetensors"), true);
        models.Remove(0);
      });
      string written = acc.SaveState(Path.Combine(dir, "ckpt"));
      Assert.AreEqual(new long[] {0, 1}, seen.ToArray());
      Assert.IsTrue(File.Exists(Path.Combine(written, "own.safetensors")));
      Assert.IsTrue(File.Exists(Path.Combine(written, "model.safetensors")));  // the second model's
      Assert.IsFalse(File.Exists(Path.Combine(written, "model_1.safetensors")));
      Assert.Throws<InvalidOperationException>(() => { int n = kept.Count; });
      float[] before;
      using (Tensor w = first.Parameter("0.weight")) before = w.ToFloatArray();
      using (TensorList zeros = TensorList.Of())
      using (Tensor z = Tensor.Of(new float[2], 1, 2)) {
        zeros.Append("0.weight", z);
        first.LoadStateDict(zeros, false);
      }
      acc.LoadState(written);
      using (Tensor w = first.Parameter("0.weight")) Assert.AreEqual(before, w.ToFloatArray());
    }
    Assert.AreEqual(baseline, Library.LiveCallbacks());
  }

  [Test]
  public void ARemovedHookRunsNoMoreAndIsReleased() {
    long baseline = Library.LiveCallbacks();
    string dir = TestDirs.Temp();
    var hooks = new List<string>();
    RemovableHandle save;
    using (Accelerator acc = NewAccelerator(dir)) {
      save = acc.RegisterSaveStatePreHook(d => hooks.Add("save"));
      RemovableHandle load = acc.RegisterLoadStatePreHook(d => hooks.Add("load"));
      string written = acc.SaveState(Path.Combine(dir, "a"));
      save.Remove();
      load.Remove();
      save.Remove();  // again: nothing
      Assert.AreEqual(baseline, Library.LiveCallbacks());  // the library let go of both hooks at once
      acc.SaveState(Path.Combine(dir, "b"));
      acc.LoadState(written);
      Assert.AreEqual(new[] {"save"}, hooks.ToArray());
    }
    save.Remove();  // the disposed accelerator's hooks went with it
  }

  [Test]
  public void AThrowingHookAbortsTheSaveWithItsMessage() {
    string dir = TestDirs.Temp();
    using (Accelerator acc = NewAccelerator(dir)) {
      acc.RegisterSaveStatePreHook(d => { throw new InvalidOperationException("disk quota"); });
      var e = Assert.Throws<AccelerateIOException>(() => acc.SaveState(Path.Combine(dir, "ckpt")));
      StringAssert.Contains("disk quota", e.Message);
      Assert.IsFalse(Directory.Exists(Path.Combine(dir, "ckpt")));
    }
  }

  [Test]
  public void AThrowingStateLoaderFailsTheLoad() {
    string dir = TestDirs.Temp();
    using (Accelerator acc = NewAccelerator(dir)) {
      acc.RegisterForCheckpointing(() => new byte[] {7}, bytes => { throw new FormatException("bad state"); });
      string written = acc.SaveState(Path.Combine(dir, "ckpt"));
      var e = Assert.Throws<AccelerateIOException>(() => acc.LoadState(written));
      StringAssert.Contains("bad state", e.Message);
    }
  }

  sealed class Recorder : ITracker {
    internal readonly List<string> Calls = new List<string>();
    internal bool FailLog;
    public void Init(string project, string configJson) { Calls.Add("init " + project + " " + configJson); }
    public void Log(IDictionary<string, double> values, long step) {
      if (FailLog) throw new IOException("tracker offline");
      foreach (var kv in values) Calls.Add("log " + step + " " + kv.Key + "=" + kv.Value);
    }
    public void Finish() { Calls.Add("finish"); }
  }

  // Backward(loss, retainGraph, createGraph): two losses of one forward back-propagate in turn;
  // without retaining the graph the second is refused.
  [Test]
  public void BackwardRetainsTheGraphOnRequest() {
    using (Accelerator acc = NewAccelerator(TestDirs.Temp()))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (Tensor x = Tensor.Of(new float[] {1, 2}, 1, 2))
    using (Tensor y = model.Forward(x))
    using (Tensor first = y.Sum())
    using (Tensor second = y.Mean()) {
      acc.Backward(first, true);
      acc.Backward(second);
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.Backward(first));
      StringAssert.Contains("second time", e.Message);
    }
  }

  sealed class TextRecorder : ITextTracker {
    internal readonly List<string> Calls = new List<string>();
    public void Init(string project, string configJson) {}
    public void Log(IDictionary<string, double> values, long step) { Calls.Add("log " + step); }
    public void LogText(IDictionary<string, string> texts, long step) {
      foreach (var kv in texts) Calls.Add("text " + step + " " + kv.Key + "=" + kv.Value);
    }
    public void Finish() {}
  }

  sealed class ImageRecorder : IImageTracker {
    public readonly List<string> Calls = new List<string>();
    public void Init(string project, string configJson) {}
    public void Log(IDictionary<string, double> values, long step) {}
    public void LogImages(IDictionary<string, byte[]> images, long step) {
      foreach (var kv in images)
        Calls.Add(step + " " + kv.Key + " " + System.Text.Encoding.GetEncoding("ISO-8859-1").GetString(kv.Value, 0, 4));
    }
    public void Finish() {}
  }

  // Images reach TensorBoard's event file and an IImageTracker as PNGs under their names; an ITracker
  // alone does not see them, though the step advances; a layout the tensor does not have is refused.
  [Test]
  public void ImagesReachTensorBoardAndImageTrackers() {
    var numbers = new Recorder();
    var pictures = new ImageRecorder();
    string events;
    string dir = TestDirs.Temp();
    using (Options o = Options.Accelerator().Put("cpu", true).Put("project_dir", dir).Put("log_with", "tensorboard"))
    using (Accelerator acc = new Accelerator(o))
    using (Tensor batch = Tensor.Of(new float[] {0f, 0.25f, 0.5f, 1f, 0.75f, 0.5f, 0.25f, 0f}, 2, 1, 2, 2)) {
      acc.AddTracker("numbers", numbers);
      acc.AddTracker("pictures", pictures);
      acc.InitTrackers("run", null);
      acc.LogImages("samples", batch, 3);
      acc.LogImages(new Dictionary<string, Tensor> {{"gray", batch}}, -1, "NCWH");
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.LogImages("bad", batch, -1, "CHW"));
      StringAssert.Contains("dataformats", e.Message);
      acc.LogScalar("loss", 0.5, -1);
      acc.EndTraining();
      events = System.Text.Encoding.GetEncoding("ISO-8859-1").GetString(File.ReadAllBytes(acc.TrackerPath("tensorboard")));
    }
    Assert.AreEqual(new[] {"init run {}", "log 5 loss=0.5", "finish"}, numbers.Calls.ToArray());
    Assert.AreEqual(new[] {"3 samples \u0089PNG", "4 gray \u0089PNG"}, pictures.Calls.ToArray());
    Assert.IsTrue(events.Contains("samples") && events.Contains("gray") && events.Contains("\u0089PNG"));
  }

  // A dict value (LogScalars) reaches a tracker as "main/name" values, and TensorBoard as add_scalars'
  // folder per name.
  [Test]
  public void AGroupOfScalarsIsLoggedUnderItsMainTag() {
    var numbers = new Recorder();
    string dir = TestDirs.Temp();
    using (Options o = Options.Accelerator().Put("cpu", true).Put("project_dir", dir).Put("log_with", "tensorboard"))
    using (Accelerator acc = new Accelerator(o)) {
      acc.AddTracker("numbers", numbers);
      acc.InitTrackers("run", null);
      acc.LogScalars("loss", new Dictionary<string, double> {{"train", 0.5}});
      var e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => acc.LogScalars("loss", new Dictionary<string, double> {{"../x", 1.0}}));
      StringAssert.Contains("out of the run's folder", e.Message);
      acc.EndTraining();
    }
    Assert.AreEqual(new[] {"init run {}", "log 0 loss/train=0.5", "finish"}, numbers.Calls.ToArray());
    Assert.IsTrue(Directory.Exists(Path.Combine(dir, "run", "loss_train")));
  }

  sealed class HistogramRecorder : IHistogramTracker {
    public readonly List<string> Calls = new List<string>();
    public readonly List<Histogram> Received = new List<Histogram>();
    public void Init(string project, string configJson) {}
    public void Log(IDictionary<string, double> values, long step) {}
    public void LogHistogram(string name, Histogram histogram, long step) {
      Calls.Add(step + " " + name);
      Received.Add(histogram);
    }
    public void Finish() {}
  }

  // LogHistogram: an event of TensorBoard's with the histogram, and the same histogram to an
  // IHistogramTracker (an ITracker alone sees none); numpy's strategies are not built.
  [Test]
  public void HistogramsReachTensorBoardAndHistogramTrackers() {
    string dir = TestDirs.Temp();
    string events;
    var numbers = new Recorder();
    var histograms = new HistogramRecorder();
    using (Options o = Options.Accelerator().Put("cpu", true).Put("project_dir", dir).Put("log_with", "tensorboard"))
    using (Accelerator acc = new Accelerator(o))
    using (Tensor w = Tensor.Of(new float[] {0.5f, -1f, 2f, 2f}, 2, 2)) {
      acc.AddTracker("numbers", numbers);
      acc.AddTracker("histograms", histograms);
      acc.InitTrackers("run", null);
      acc.LogHistogram("layer/weights", w, 3);
      acc.LogHistogram("coarse", w, bins: "4");
      // Accelerate's log_kwargs: SummaryWriter's walltime is taken; a keyword its log lacks, refused.
      acc.Log(new Dictionary<string, double> {{"loss", 0.5}}, 5, "{\"tensorboard\": {\"walltime\": 1234.5}}");
      var k = Assert.Throws<AccelerateInvalidArgumentException>(
          () => acc.Log(new Dictionary<string, double> {{"loss", 0.5}}, 6, "{\"tensorboard\": {\"when\": 1}}"));
      StringAssert.Contains("takes no keyword argument \"when\"", k.Message);
      // Texts and groups take log_kwargs too: add_text's walltime; add_scalars refuses add_scalar's new_style.
      acc.LogText("note", "hi", 6, "{\"tensorboard\": {\"walltime\": 1.5}}");
      var g = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.LogScalars(
          "loss", new Dictionary<string, double> {{"train", 0.5}}, 7, "{\"tensorboard\": {\"new_style\": true}}"));
      StringAssert.Contains("takes no keyword argument \"new_style\"", g.Message);
      var e = Assert.Throws<AccelerateUnsupportedException>(() => acc.LogHistogram("w", w, bins: "auto"));
      StringAssert.Contains("bin-width strategies", e.Message);
      acc.EndTraining();
      events = System.Text.Encoding.GetEncoding("ISO-8859-1").GetString(File.ReadAllBytes(acc.TrackerPath("tensorboard")));
    }
    StringAssert.Contains("layer/weights", events);
    StringAssert.Contains("coarse", events);
    Assert.AreEqual(new[] {"init run {}", "log 5 loss=0.5", "finish"}, numbers.Calls.ToArray());
    Assert.AreEqual(new[] {"3 layer/weights", "4 coarse"}, histograms.Calls.ToArray());
    // 4 equal-width bins over [-1, 2]: -1 | (none) | 0.5 | 2, 2; an empty bin leads, as in torch.
    Histogram coarse = histograms.Received[1];
    Assert.AreEqual(new double[] {-1, -0.25, 0.5, 1.25, 2}, coarse.BucketLimits);
    Assert.AreEqual(new double[] {0, 1, 0, 1, 2}, coarse.BucketCounts);
    Assert.AreEqual(new double[] {-1, 2, 4, 3.5, 9.25},
                    new[] {coarse.Min, coarse.Max, coarse.Num, coarse.Sum, coarse.SumSquares});
  }

  // log_with "mlflow" with init_kwargs: the run's name and parameters in MLflow's file store, a
  // number as a metric line at its step; a keyword the tracker does not take is refused.
  [Test]
  public void MlflowRunsTakeInitKwargs() {
    string dir = TestDirs.Temp();
    string runDir;
    using (Options o = Options.Accelerator().Put("cpu", true).Put("project_dir", dir).Put("log_with", "mlflow"))
    using (Accelerator acc = new Accelerator(o)) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => acc.InitTrackers("run", null, "{\"mlflow\": {\"run_nme\": \"x\"}}"));
      StringAssert.Contains("run_nme", e.Message);
      acc.InitTrackers("run", "{\"lr\": 0.5}", "{\"mlflow\": {\"run_name\": \"baseline\"}}");
      acc.LogScalar("loss", 1.25, 3);
      string config = Path.Combine(dir, "config.yaml");
      File.WriteAllText(config, "lr: 0.5\n");
      acc.LogArtifact("mlflow", config, "configs");
      acc.EndTraining();
      runDir = acc.TrackerPath("mlflow");
    }
    Assert.AreEqual("lr: 0.5\n", File.ReadAllText(Path.Combine(runDir, "artifacts", "configs", "config.yaml")));
    Assert.AreEqual("baseline", File.ReadAllText(Path.Combine(runDir, "tags", "mlflow.runName")));
    Assert.AreEqual("0.5", File.ReadAllText(Path.Combine(runDir, "params", "lr")));
    StringAssert.IsMatch(@"^\d+ 1\.25 3\n$", File.ReadAllText(Path.Combine(runDir, "metrics", "loss")));
  }

  // Texts reach an ITextTracker's LogText as given; its Log sees numbers only, and an ITracker alone
  // leaves texts.
  [Test]
  public void TextsReachATextTracker() {
    var texts = new TextRecorder();
    var numbers = new Recorder();
    const string sample = "once upon a time\nthere was a \U0001F680";
    using (Accelerator acc = NewAccelerator(TestDirs.Temp())) {
      acc.AddTracker("texts", texts);
      acc.AddTracker("numbers", numbers);
      acc.InitTrackers("run", null);
      acc.LogScalar("loss", 0.5, -1);
      acc.LogText("sample", sample);
      var nul = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.LogText("a", "b\0c", 5));
      StringAssert.Contains("NUL", nul.Message);
      acc.EndTraining();
    }
    Assert.AreEqual(new[] {"log 0", "text 1 sample=" + sample}, texts.Calls.ToArray());
    Assert.AreEqual(new[] {"init run {}", "log 0 loss=0.5", "finish"}, numbers.Calls.ToArray());
  }

  [Test]
  public void AProgramTrackerReceivesTheRun() {
    var rec = new Recorder();
    using (Accelerator acc = NewAccelerator(TestDirs.Temp())) {
      acc.AddTracker("mine", rec);
      using (StringList names = acc.TrackerNames()) Assert.AreEqual(new[] {"mine"}, names.ToList().ToArray());
      acc.InitTrackers("run1", "{\"lr\":0.5}");
      acc.Log(new Dictionary<string, double> {{"loss", 1.5}});
      acc.LogScalar("acc", 0.25, 7);
      rec.FailLog = true;
      var e = Assert.Throws<AccelerateIOException>(() => acc.LogScalar("loss", 1, -1));
      StringAssert.Contains("tracker offline", e.Message);
      acc.EndTraining();
      Assert.AreEqual("", acc.TrackerPath("mine"));
    }
    Assert.AreEqual(new[] {"init run1 {\"lr\":0.5}", "log 0 loss=1.5", "log 7 acc=0.25", "finish"}, rec.Calls.ToArray());
  }

  [Test]
  public void AnLrLambdaSetsTheRates() {
    using (Model model = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 0.8))
    using (var opt = new Optimizer(model, "sgd", oo))
    using (Scheduler sched = Scheduler.FromLambda(opt, step => {
             if (step == 3) throw new ArgumentException("no step 3");
             return Math.Pow(0.5, step);
           })) {
      Assert.AreEqual(0.8, opt.GetLr(0));
      sched.Step();
      sched.Step();
      Assert.AreEqual(0.2, opt.GetLr(0));
      var e = Assert.Throws<AccelerateIOException>(() => sched.Step());
      StringAssert.Contains("no step 3", e.Message);
      Assert.AreEqual(0.2, opt.GetLr(0));
    }
  }

  // A tracker refused for a NUL in its name is not kept (pinned) anywhere: the library never took
  // it, so nothing would ever release it.
  [Test]
  public void ATrackerRefusedForItsNameIsNotKept() {
    using (Accelerator acc = NewAccelerator(TestDirs.Temp())) {
      long baseline = Library.LiveCallbacks();
      var nul = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.AddTracker("a\0b", new Recorder()));
      StringAssert.Contains("NUL", nul.Message);
      Assert.AreEqual(baseline, Library.LiveCallbacks());
      using (StringList names = acc.TrackerNames()) Assert.AreEqual(0, names.ToList().Count);
    }
  }

  // Names cross whole (a newline is part of a name, never a separator), and a negative group index
  // is refused by its own value.
  [Test]
  public void ParameterNamesCrossWholeAndNegativeIndicesAreRefused() {
    using (Model model = Model.FromSpec(Spec))
    using (var opt = new Optimizer(model, "sgd", null)) {
      var joined = Assert.Throws<AccelerateInvalidArgumentException>(
          () => opt.AddParamGroup(new[] { "0.weight\n0.bias" }, null));
      StringAssert.Contains("0.weight\n0.bias", joined.Message);
      Assert.AreEqual(1, opt.NumParamGroups);
      var negative = Assert.Throws<AccelerateInvalidArgumentException>(() => opt.GetLr(-1));
      StringAssert.Contains("group is negative: -1", negative.Message);
      opt.AddParamGroup(new[] { "0.bias" }, null);
      Assert.AreEqual(2, opt.NumParamGroups);
    }
  }

  [Test]
  public void EachGroupHasItsOwnFunctionAndACyclicScheduleTakesAScale() {
    using (Model model = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 0.8).Put("momentum", 0.9))
    using (var opt = new Optimizer(model, "sgd", oo))
    using (Options bias = Options.Optimizer().Put("lr", 0.4)) {
      opt.AddParamGroup(new[] { "0.bias" }, bias);
      var fns = new List<Func<long, double>> { step => 0.5, step => {
        if (step == 1) throw new ArgumentException("no step 1");
        return 0.25;
      } };
      using (Scheduler sched = Scheduler.FromLambdas(opt, fns)) {  // PyTorch's LambdaLR(opt, [f0, f1])
        Assert.AreEqual(0.4, opt.GetLr(0));
        Assert.AreEqual(0.1, opt.GetLr(1));
        var e = Assert.Throws<AccelerateIOException>(() => sched.Step());
        StringAssert.Contains("parameter group 1 at step 1", e.Message);
        Assert.AreEqual(0.4, opt.GetLr(0));
      }
      var wrongCount = Assert.Throws<AccelerateInvalidArgumentException>(
          () => Scheduler.FromMultiplicatives(opt, new Func<long, double>[] { step => 0.5 }));
      StringAssert.Contains("expected 2 factors", wrongCount.Message);
      using (Options co = Options.Scheduler().Put("base_lr", 0.1).Put("max_lr", 0.5).Put("step_size_up", 2)
                              .Put("scale_mode", "iterations"))
      using (Scheduler cyclic = Scheduler.FromCyclic(opt, co, x => 0.5)) {
        cyclic.Step();  // halfway up, the height halved: 0.1 + (0.5 - 0.1) * 0.5 * 0.5
        Assert.AreEqual(0.2, opt.GetLr(0), 1e-15);
        Assert.AreEqual(0.9 - (0.9 - 0.8) * 0.5 * 0.5, opt.GetHyperparameter(0, "momentum"), 1e-15);
      }
    }
  }

  [Test]
  public void AMultiplicativeScheduleChainedWithAnotherMovesTheRateBefore() {
    using (Model model = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 0.8))
    using (var opt = new Optimizer(model, "sgd", oo))
    using (Options co = Options.Scheduler().Put("factor", 0.5).Put("total_iters", 2))
    using (Scheduler sched = Scheduler.FromMultiplicative(opt, step => {
             if (step == 4) throw new ArgumentException("no step 4");
             return 0.5;
           })) {
      sched.Chain("constant_lr", co);  // PyTorch's ChainedScheduler([MultiplicativeLR, ConstantLR])
      Assert.AreEqual(0.4, opt.GetLr(0));
      sched.Step();
      Assert.AreEqual(0.2, opt.GetLr(0));
      sched.Step();
      Assert.AreEqual(0.2, opt.GetLr(0));  // halved, then the constant's factor undone
      sched.Step();
      Assert.AreEqual(0.1, sched.GetLastLr(0));
      var e = Assert.Throws<AccelerateIOException>(() => sched.Step());
      StringAssert.Contains("no step 4", e.Message);
      Assert.AreEqual(0.1, opt.GetLr(0));
      Assert.Throws<AccelerateInvalidArgumentException>(() => sched.Chain("exponential", null));
    }
  }

  [Test]
  public void SaveAndStateDictOfAPreparedModel() {
    string dir = TestDirs.Temp();
    using (Accelerator acc = NewAccelerator(dir))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (TensorList state = acc.GetStateDict(model, true)) {
      Assert.AreEqual("0.weight", state.Name(0));
      string file = Path.Combine(dir, "w.safetensors");
      acc.Save(state, file);
      using (TensorList back = TensorList.LoadSafetensors(file))
      using (Tensor w = back.Find("0.weight"))
      using (Tensor p = model.Parameter("0.weight"))
        Assert.AreEqual(p.ToFloatArray(), w.ToFloatArray());
    }
  }

  [Test]
  public void ProgressAndAutocastScopes() {
    using (Accelerator acc = NewAccelerator(TestDirs.Temp())) {
      using (var p = new Progress(acc, 4, "steps")) {
        p.Update(2);
        p.SetPostfix("loss 0.5");
        p.Finish();
        p.Update(1);  // ignored after Finish
      }
      using (acc.Autocast(false))
      using (Tensor t = Tensor.Of(new float[] {1, 2}, 2))
      using (Tensor s = t.Sum()) Assert.AreEqual(3.0, s.Item());
    }
  }
}

}

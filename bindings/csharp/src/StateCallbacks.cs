// Adapters for the checkpoint, tracker and schedule callbacks (same rules as Callbacks.cs: pinned
// while registered, every exception caught and returned as a failure with its message).
using System;
using System.Collections.Generic;
using System.Linq;

namespace Accelerate {

/// A tracker written in C#: Accelerator.AddTracker calls it on the main process.
public interface ITracker {
  /// A run starts: its project name and hyper-parameters as a JSON object ("{}" when none).
  void Init(string project, string configJson);
  void Log(IDictionary<string, double> values, long step);
  /// The run ends.
  void Finish();
}

/// A tracker that also takes the texts of Accelerator.LogText (an ITracker alone leaves them).
public interface ITextTracker : ITracker {
  void LogText(IDictionary<string, string> texts, long step);
}

/// A tracker that also takes the images of Accelerator.LogImages, each a PNG file's bytes (an
/// ITracker alone leaves them, and none are encoded for it).
public interface IImageTracker : ITracker {
  void LogImages(IDictionary<string, byte[]> images, long step);
}

/// A tracker that also takes the histograms of Accelerator.LogHistogram (an ITracker alone leaves
/// them, and none is computed for it).
public interface IHistogramTracker : ITracker {
  void LogHistogram(string name, Histogram histogram, long step);
}

/// A histogram of Accelerator.LogHistogram as a tracker receives it (TensorBoard's HistogramProto,
/// computed as torch's add_histogram computes it): the values' minimum, maximum, count, sum and sum of
/// squares, and its buckets, bucket i holding BucketCounts[i] values above BucketLimits[i - 1] up to
/// BucketLimits[i] (the first bucket, empty, ends where the values begin).
public sealed class Histogram {
  public double Min { get; }
  public double Max { get; }
  public double Num { get; }
  public double Sum { get; }
  public double SumSquares { get; }
  public IReadOnlyList<double> BucketLimits { get; }
  public IReadOnlyList<double> BucketCounts { get; }

  internal Histogram(HistogramView view) {
    Min = view.Min();
    Max = view.Max();
    Num = view.Num();
    Sum = view.Sum();
    SumSquares = view.SumSquares();
    var limits = new double[view.Size()];
    var counts = new double[limits.LongLength];
    view.CopyLimits(limits, limits.LongLength);
    view.CopyCounts(counts, counts.LongLength);
    BucketLimits = Array.AsReadOnly(limits);
    BucketCounts = Array.AsReadOnly(counts);
  }
}

public partial class Images {
  internal IDictionary<string, byte[]> ToDictionary() {
    var pngs = new Dictionary<string, byte[]>();
    for (long i = 0; i < Size(); ++i) {
      var png = new byte[PngSize(i)];
      CopyPng(i, png, png.LongLength);
      pngs[Name(i)] = png;
    }
    return pngs;
  }
}

public partial class Bytes {
  public byte[] ToArray() {
    var a = new byte[Size()];
    CopyTo(a, a.LongLength);
    return a;
  }
}

public partial class Texts {
  public Dictionary<string, string> ToDictionary() {
    var d = new Dictionary<string, string>();
    for (long i = 0, n = Size(); i < n; ++i) d[Name(i)] = Text(i);
    return d;
  }
}

public partial class Metrics {
  public Dictionary<string, double> ToDictionary() {
    var d = new Dictionary<string, double>();
    for (long i = 0, n = Size(); i < n; ++i) d[Name(i)] = Value(i);
    return d;
  }
}

internal sealed class StateAdapter : StateHandler {
  readonly Func<byte[]> save;
  readonly Action<byte[]> load;

  internal StateAdapter(Func<byte[]> save, Action<byte[]> load) {
    this.save = save;
    this.load = load;
    Pin();
  }

  public override int Save(Bytes out_) {
    return CallbackErrors.Run(() => {
      byte[] data = save() ?? new byte[0];
      out_.Append(data, data.LongLength);
    });
  }

  public override int Load(Bytes in_) {
    return CallbackErrors.Run(() => load(in_.ToArray()));
  }

  public override void Released() { Unpin(); }
}

internal sealed class HookAdapter : CheckpointHook {
  readonly Action<string> hook;

  internal HookAdapter(Action<string> hook) {
    this.hook = hook;
    Pin();
  }

  public override int Run(string dir) {
    return CallbackErrors.Run(() => hook(dir));
  }

  public override void Released() { Unpin(); }
}

/// The prepared models a checkpoint pre-hook is handed, in prepare order: those whose weights the
/// library will save or load (Accelerate's hook(models, weights, dir) / hook(models, dir)). Usable
/// while the hook runs only.
public sealed class CheckpointModels {
  CheckpointModelsView view;

  internal CheckpointModels(CheckpointModelsView view) { this.view = view; }

  /// How many models are left to the library.
  public int Count { get { return checked((int)Live().Size()); } }
  /// The i-th model left: a new handle to the prepared model, which the caller disposes.
  public Model Get(int i) { return Live().Model(i); }
  /// The i-th model's place in prepare order.
  public long Index(int i) { return Live().Index(i); }
  /// Takes the i-th model out (the later ones move up): the library neither writes nor reads its
  /// weights, and the checkpoint's weight files number the models left (Accelerate's weights.pop(i),
  /// models.pop(i)). A model prepared with sharded data parallelism cannot be taken out.
  public void Remove(int i) { Live().Remove(i); }

  internal void End() { view = null; }

  CheckpointModelsView Live() {
    if (view == null)
      throw new InvalidOperationException("these models were handed to a checkpoint pre-hook that has returned");
    return view;
  }
}

internal sealed class ModelsHookAdapter : ModelsCheckpointHook {
  readonly Action<CheckpointModels, string> hook;

  internal ModelsHookAdapter(Action<CheckpointModels, string> hook) {
    this.hook = hook;
    Pin();
  }

  public override int Run(CheckpointModelsView view, string dir) {
    var models = new CheckpointModels(view);
    try {
      return CallbackErrors.Run(() => hook(models, dir));
    } finally {
      models.End();
    }
  }

  public override void Released() { Unpin(); }
}

internal sealed class TraceReadyAdapter : TraceReady {
  readonly Action<long> handler;

  internal TraceReadyAdapter(Action<long> handler) {
    this.handler = handler;
    Pin();
  }

  public override int Ready(long step) {
    return CallbackErrors.Run(() => handler(step));
  }

  public override void Released() { Unpin(); }
}

internal sealed class TrackerAdapter : Tracker {
  readonly ITracker tracker;

  internal TrackerAdapter(ITracker tracker) {
    this.tracker = tracker;
    Pin();
  }

  public override int Init(string project, string configJson) {
    return CallbackErrors.Run(() => tracker.Init(project, configJson));
  }

  public override int Log(Metrics metrics, long step) {
    return CallbackErrors.Run(() => tracker.Log(metrics.ToDictionary(), step));
  }

  public override int LogText(Texts texts, long step) {
    var textTracker = tracker as ITextTracker;
    if (textTracker == null) return 0;
    return CallbackErrors.Run(() => textTracker.LogText(texts.ToDictionary(), step));
  }

  public override bool TakesImages() { return tracker is IImageTracker; }

  public override int LogImages(Images images, long step) {
    var imageTracker = tracker as IImageTracker;
    if (imageTracker == null) return 0;
    return CallbackErrors.Run(() => imageTracker.LogImages(images.ToDictionary(), step));
  }

  public override bool TakesHistograms() { return tracker is IHistogramTracker; }

  public override int LogHistogram(HistogramView histogram, long step) {
    var histogramTracker = tracker as IHistogramTracker;
    if (histogramTracker == null) return 0;
    return CallbackErrors.Run(() => histogramTracker.LogHistogram(histogram.Name(), new Histogram(histogram), step));
  }

  public override int Finish() {
    return CallbackErrors.Run(() => tracker.Finish());
  }

  public override void Released() { Unpin(); }
}

internal sealed class LrLambdaAdapter : LrLambda {
  readonly Func<long, double> fn;

  internal LrLambdaAdapter(Func<long, double> fn) {
    this.fn = fn;
    Pin();
  }

  public override int Factor(long step, LrFactor out_) {
    return CallbackErrors.Run(() => out_.Set(fn(step)));
  }

  public override void Released() { Unpin(); }
}

internal sealed class GroupLrLambdaAdapter : GroupLrLambda {
  readonly Func<long, double>[] fns;

  internal GroupLrLambdaAdapter(IEnumerable<Func<long, double>> fns) {
    this.fns = fns.ToArray();
    if (Array.IndexOf(this.fns, null) >= 0) throw new ArgumentNullException("fns", "a group's function is null");
    Pin();
  }

  internal long Count { get { return fns.Length; } }

  public override int Factor(long group, long step, LrFactor out_) {
    return CallbackErrors.Run(() => out_.Set(fns[(int)group](step)));
  }

  public override void Released() { Unpin(); }
}

// Borrowed for one search (not pinned: the caller holds it for the call and disposes it): returns
// the status of what failed, as BatchSizeRun asks.
internal sealed class BatchSizeAdapter : BatchSizeRun {
  readonly Action<long> run;

  internal BatchSizeAdapter(Action<long> run) { this.run = run; }

  public override int Run(long batchSize) {
    try {
      run(batchSize);
      return 0;
    } catch (AccelerateException e) {
      CallbackErrors.Report(() => e.Message);
      return (int)e.Status;
    } catch (Exception e) {
      CallbackErrors.Failed(e);
      return (int)Status.IO;
    }
  }
}

public partial class Library {
  /// Accelerate's find_executable_batch_size: runs `run` with startingBatchSize and, while it throws
  /// AccelerateOutOfMemoryException, again with 90% of the batch size (rounded down); returns the
  /// batch size that ran. Another exception ends the search: the library's as it was thrown, any
  /// other as AccelerateIOException with its message.
  public static long FindExecutableBatchSize(long startingBatchSize, Action<long> run) {
    if (run == null) throw new ArgumentNullException("run");
    using (var adapter = new BatchSizeAdapter(run)) return FindBatchSizeWith(startingBatchSize, adapter);
  }
}

public partial class Scheduler {
  /// PyTorch's LambdaLR: lr = base_lr * factor(step), called at creation (step 0) and every step.
  /// An exception fails the step (AccelerateIOException) and leaves the rates as they were.
  public static Scheduler FromLambda(Optimizer opt, Func<long, double> factor) {
    if (factor == null) throw new ArgumentNullException("factor");
    return FromLrLambda(opt, new LrLambdaAdapter(factor));
  }

  /// PyTorch's MultiplicativeLR: lr = the rate before * factor(step), at every step from step 1
  /// (not called for step 0). An exception fails the step as FromLambda's does.
  public static Scheduler FromMultiplicative(Optimizer opt, Func<long, double> factor) {
    if (factor == null) throw new ArgumentNullException("factor");
    return FromLrMultiplicative(opt, new LrLambdaAdapter(factor));
  }

  /// PyTorch's LambdaLR(opt, [fn0, fn1, ...]): group g's lr = its base_lr * factors[g](step), one
  /// function per parameter group (another count is refused), called in group order.
  public static Scheduler FromLambdas(Optimizer opt, IEnumerable<Func<long, double>> factors) {
    if (factors == null) throw new ArgumentNullException("factors");
    var adapter = new GroupLrLambdaAdapter(factors);
    return FromGroupLrLambda(opt, adapter.Count, adapter);
  }

  /// PyTorch's MultiplicativeLR(opt, [fn0, fn1, ...]): group g's lr = its rate before * factors[g](step).
  public static Scheduler FromMultiplicatives(Optimizer opt, IEnumerable<Func<long, double>> factors) {
    if (factors == null) throw new ArgumentNullException("factors");
    var adapter = new GroupLrLambdaAdapter(factors);
    return FromGroupLrMultiplicative(opt, adapter.Count, adapter);
  }

  /// PyTorch's CyclicLR with scale_fn: opts as the "cyclic" schedule's (scale_mode "cycle" or
  /// "iterations"; no mode or gamma); scale(x) scales the height of cycle x (from 1) or of step x.
  public static Scheduler FromCyclic(Optimizer opt, Options opts, Func<long, double> scale) {
    if (scale == null) throw new ArgumentNullException("scale");
    return FromCyclicScale(opt, opts, new LrLambdaAdapter(scale));
  }
}

public partial class Accelerator {
  /// Accelerate's register_for_checkpointing: save() returns the object's state, which SaveState
  /// stores and LoadState hands back to load() on every process.
  public void RegisterForCheckpointing(Func<byte[]> save, Action<byte[]> load) {
    if (save == null || load == null) throw new ArgumentNullException(save == null ? "save" : "load");
    RegisterForCheckpointing(new StateAdapter(save, load));
  }
  /// Runs with the checkpoint's folder (files written there become part of the checkpoint) before
  /// SaveState writes; an exception aborts the save on every process. The handle removes the hook
  /// again (Accelerate's RemovableHandle).
  public RemovableHandle RegisterSaveStatePreHook(Action<string> hook) {
    if (hook == null) throw new ArgumentNullException("hook");
    return new RemovableHandle(this, RegisterSaveStatePreHook(new HookAdapter(hook)));
  }
  /// Runs with the folder before LoadState reads; an exception aborts the load on every process.
  public RemovableHandle RegisterLoadStatePreHook(Action<string> hook) {
    if (hook == null) throw new ArgumentNullException("hook");
    return new RemovableHandle(this, RegisterLoadStatePreHook(new HookAdapter(hook)));
  }
  /// Accelerate's register_save_state_pre_hook(hook(models, weights, dir)): runs with the models whose
  /// weights the library will save and the checkpoint's folder (files written there become part of
  /// the checkpoint); a hook that saves a model's weights itself takes it out.
  public RemovableHandle RegisterSaveStatePreHook(Action<CheckpointModels, string> hook) {
    if (hook == null) throw new ArgumentNullException("hook");
    return new RemovableHandle(this, RegisterSaveStateModelsPreHook(new ModelsHookAdapter(hook)));
  }
  /// Accelerate's register_load_state_pre_hook(hook(models, dir)): a hook takes out the models it loads
  /// itself, those a save hook took out.
  public RemovableHandle RegisterLoadStatePreHook(Action<CheckpointModels, string> hook) {
    if (hook == null) throw new ArgumentNullException("hook");
    return new RemovableHandle(this, RegisterLoadStateModelsPreHook(new ModelsHookAdapter(hook)));
  }
  /// Accelerate's ProfileKwargs(on_trace_ready=handler), for every later profile: runs with the step at
  /// which each recorded cycle ends; ProfileSummary and ExportChromeTrace read that cycle in it. An
  /// exception fails that profile step or end (AccelerateIOException).
  public void OnTraceReady(Action<long> handler) {
    if (handler == null) throw new ArgumentNullException("handler");
    OnTraceReady(new TraceReadyAdapter(handler));
  }
  public void AddTracker(string name, ITracker tracker) {
    if (tracker == null) throw new ArgumentNullException("tracker");
    // The name first: a tracker refused before the library takes it would never be released.
    AccelerateException.NoNul(name);
    AddTracker(name, new TrackerAdapter(tracker));
  }
  /// Accelerate's log: values by name at `step`, or at the step after the last one when step is negative.
  /// logKwargs: Accelerate's log_kwargs, a JSON object from tracker names to the keyword arguments of
  /// their log, e.g. {"tensorboard": {"walltime": 1700000000.5}} (null for none).
  public void Log(IDictionary<string, double> values, long step = -1, string logKwargs = null) {
    var names = new List<string>(Arg.NotNull(values, "values").Keys);
    var data = names.Select(n => values[n]).ToArray();
    var encoded = Arg.NulJoined("log: the metric name", names);
    LogValues(encoded, encoded.LongLength, data, data.LongLength, step, logKwargs);
  }
  /// Accelerate's log of a dict value (TensorBoard's add_scalars): values by name under mainTag, at
  /// `step` or at the step after the last one when step is negative. TensorBoard draws them in one
  /// chart; the other trackers get "mainTag/name".
  /// logKwargs: as Log's (TensorBoard's add_scalars takes walltime alone).
  public void LogScalars(string mainTag, IDictionary<string, double> values, long step = -1, string logKwargs = null) {
    var names = new List<string>(Arg.NotNull(values, "values").Keys);
    var data = names.Select(n => values[n]).ToArray();
    var encoded = Arg.NulJoined("LogScalars: the name", names);
    LogGroup(Arg.NotNull(mainTag, "mainTag"), encoded, encoded.LongLength, data, data.LongLength, step, logKwargs);
  }
  /// Accelerate's log of str values (TensorBoard's add_text): texts by name at `step`, or at the step
  /// after the last one when step is negative. Program trackers get them as ITextTracker.
  /// logKwargs: as Log's (TensorBoard's add_text takes walltime alone).
  public void LogText(IDictionary<string, string> texts, long step = -1, string logKwargs = null) {
    var names = new List<string>(Arg.NotNull(texts, "texts").Keys);
    var values = names.Select(n => texts[n]).ToList();
    var encodedNames = Arg.NulJoined("LogText: the name", names);
    var encodedTexts = Arg.NulJoined("LogText: the text", values);
    LogTexts(encodedNames, encodedNames.LongLength, encodedTexts, encodedTexts.LongLength, step, logKwargs);
  }
  public void LogText(string name, string text, long step = -1, string logKwargs = null) {
    LogText(new Dictionary<string, string> {{Arg.NotNull(name, "name"), text}}, step, logKwargs);
  }
  /// Accelerate's TensorBoardTracker.log_images (torch's add_images): images by name at `step`, or at
  /// the step after the last one when step is negative; dataformats null is "NCHW" (a batch shown as
  /// a grid), else an order of NCHW, CHW or HW. Only TensorBoard shows them.
  public void LogImages(IDictionary<string, Tensor> images, long step = -1, string dataformats = null) {
    var names = new List<string>(Arg.NotNull(images, "images").Keys);
    var encoded = Arg.NulJoined("LogImages: the name", names);
    using (TensorList list = TensorList.Of(names.Select(n => images[n]).ToArray()))
      LogImages(encoded, encoded.LongLength, list, step, dataformats);
  }
  public void LogImages(string name, Tensor images, long step = -1, string dataformats = null) {
    LogImages(new Dictionary<string, Tensor> {{Arg.NotNull(name, "name"), images}}, step, dataformats);
  }
  /// torch's SummaryWriter.add_histogram: the histogram of values' numbers at `step` (negative: the
  /// step after the last one), in TensorBoard's HISTOGRAMS dashboard. bins null is "tensorflow"
  /// (SummaryWriter's default bins), else a number of equal-width bins ("64"); maxBins 0 for no limit.
  public void LogHistogram(string name, Tensor values, long step = -1, string bins = null, long maxBins = 0) {
    LogHistogramWith(AccelerateException.NoNul(Arg.NotNull(name, "name")), values, step, bins, maxBins);
  }
  /// `using (acc.Autocast()) { ... }`: the accelerator's mixed precision for code that is not a
  /// prepared model (enabled false: autocast off). It ends on the thread it began on.
  public Scope Autocast(bool enabled = true) {
    AutocastBegin(enabled);
    return new Scope(AutocastEnd);
  }
}

/// Removes a save or load pre-hook again: what Accelerate's register_save_state_pre_hook and
/// register_load_state_pre_hook return.
public sealed class RemovableHandle {
  readonly Accelerator accelerator;
  readonly long id;

  internal RemovableHandle(Accelerator accelerator, long id) {
    this.accelerator = accelerator;
    this.id = id;
  }

  /// The hook runs no more (a SaveState or LoadState already running it finishes with it). Again, or
  /// once the accelerator is disposed (its hooks went with it), Remove does nothing.
  public void Remove() {
    if (!accelerator.IsDisposed) accelerator.RemoveStatePreHook(id);
  }
}

}

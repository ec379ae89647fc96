// Accelerator: Prepare overloads, scoped sections for `using`, byte-array collectives.
using System.Collections.Generic;

namespace Accelerate {

public partial class Accelerator {
  public Model Prepare(Model model) { return PrepareModel(model, Placement.Default); }
  public Optimizer Prepare(Optimizer opt) { return PrepareOptimizer(opt, Placement.Default); }
  public DataLoader Prepare(DataLoader loader) { return PrepareDataLoader(loader, Placement.Default); }
  public Scheduler Prepare(Scheduler sched) { return PrepareScheduler(sched); }
  /// Accelerate's backward(loss, retain_graph=..., create_graph=...): retainGraph keeps the graph for
  /// another backward through it; createGraph gives gradients a graph of their own (and keeps it).
  public void Backward(Tensor loss, bool retainGraph, bool createGraph = false) {
    BackwardWith(loss, retainGraph, createGraph);
  }
  /// Accelerate's init_trackers(project_name, config, init_kwargs): initKwargsJson is a JSON object
  /// from tracker names to their keyword arguments, e.g. {"mlflow": {"run_name": "baseline"}}.
  public void InitTrackers(string project, string configJson, string initKwargsJson) {
    InitTrackersWith(project, configJson, initKwargsJson);
  }

  /// `using (acc.Accumulate()) { ... }`: one micro-step of gradient accumulation.
  public Scope Accumulate() {
    AccumulateBegin();
    return new Scope(AccumulateEnd);
  }
  /// Gradients accumulate locally, without the allreduce, inside the scope.
  public Scope NoSync(Model model) {
    NoSyncBegin(model);
    return new Scope(() => NoSyncEnd(model));
  }
  /// Accelerate's profile(): `using (var p = acc.Profile(Options.Profile().Put("output_trace_dir", dir)))
  /// { ...; p.Step(); }`: torch's profiler records this thread's operators until Dispose, which writes
  /// output_trace_dir/profile_&lt;process index&gt;.json; ProfileSummary() is then the operators' table.
  public Profile Profile(Options opts = null) {
    ProfileBegin(opts);
    return new Profile(ProfileStep, ProfileEnd);
  }
  /// Accelerate's LocalSGD: `using (var l = acc.LocalSgd(model, 8)) { ...; opt.Step(); l.Step(); }`.
  /// Each process steps on its own gradients; every localSgdSteps-th Step() and Dispose average the
  /// parameters over the processes.
  public LocalSgd LocalSgd(Model model, long localSgdSteps, bool enabled = true) {
    LocalSgdBegin(model, localSgdSteps, enabled);
    return new LocalSgd(() => LocalSgdStep(model), () => LocalSgdEnd(model));
  }
  /// Accelerate's join_uneven_inputs: processes may run different numbers of training steps of the
  /// model inside the scope; disposing it where a process's data has ended joins the others until
  /// all have ended, then every replica takes the weights of one that trained to the end.
  /// evenBatches, if given, sets every prepared map-style loader's even_batches until the end.
  public Scope JoinUnevenInputs(Model model, bool? evenBatches = null) {
    JoinUnevenInputsBegin(model, evenBatches.HasValue ? (evenBatches.Value ? 1 : 0) : -1);
    return new Scope(() => JoinUnevenInputsEnd(model));
  }
  /// The main process runs the scope first; the others wait for it.
  public Scope MainProcessFirst() {
    MainProcessFirstBegin();
    return new Scope(MainProcessFirstEnd);
  }
  public Scope LocalMainProcessFirst() {
    LocalMainProcessFirstBegin();
    return new Scope(LocalMainProcessFirstEnd);
  }

  /// Every process's bytes, in rank order.
  public List<byte[]> GatherObject(byte[] data, string name = null) {
    using (StringList list = GatherObject(Arg.NotNull(data, "data"), data.LongLength, name)) {
      var result = new List<byte[]>();
      for (long i = 0, n = list.Count; i < n; ++i) result.Add(list.GetBytes(i));
      return result;
    }
  }
  /// Process src's bytes on every process (the others' data is not read; it may be null).
  public byte[] BroadcastObject(byte[] data, long src, string name = null) {
    if (data == null) data = new byte[0];
    using (StringList list = BroadcastObject(data, data.LongLength, src, name)) {
      return list.GetBytes(0);
    }
  }
  /// This process's share {start, end, padding} of n items.
  public long[] SplitBetweenProcesses(long n, bool applyPadding) {
    var r = new long[3];
    SplitBetweenProcesses(n, applyPadding, r, r.LongLength);
    return r;
  }
}

}

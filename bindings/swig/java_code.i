/* java_code.i — idiomatic Java methods added to the SWIG proxies (arrays in and out, varargs,
 * scopes for try-with-resources, lambdas for callbacks). Included by java.i, before the classes. */

%rename(gatherObjectList) acc_accelerator::gatherObject;
%rename(broadcastObjectList) acc_accelerator::broadcastObject;
%typemap(javainterfaces) acc_dataloader "AutoCloseable, Iterable<TensorList>"

%typemap(javacode) acc_tensor %{
  /** Takes this tensor out of the tensor scope or batch that would close it: its caller closes it. */
  public Tensor keep() {
    swigMoveTo(null);
    return this;
  }
  public static Tensor of(float[] data, long... shape) { return fromFloats(data, shape); }
  public static Tensor of(double[] data, long... shape) { return fromDoubles(data, shape); }
  public static Tensor of(long[] data, long... shape) { return fromLongs(data, shape); }
  public static Tensor of(int[] data, long... shape) { return fromInts(data, shape); }
  /** uint8 elements (Java's bytes read as unsigned). */
  public static Tensor of(byte[] data, long... shape) { return fromBytes(data, shape); }

  public long[] shape() {
    long[] s = new long[Math.toIntExact(ndim())];
    copyShape(s);
    return s;
  }
  public float[] toFloatArray() {
    float[] a = new float[Math.toIntExact(numel())];
    copyToFloats(a);
    return a;
  }
  public double[] toDoubleArray() {
    double[] a = new double[Math.toIntExact(numel())];
    copyToDoubles(a);
    return a;
  }
  public long[] toLongArray() {
    long[] a = new long[Math.toIntExact(numel())];
    copyToLongs(a);
    return a;
  }
  public int[] toIntArray() {
    int[] a = new int[Math.toIntExact(numel())];
    copyToInts(a);
    return a;
  }
  public byte[] toByteArray() {
    byte[] a = new byte[Math.toIntExact(numel())];
    copyToBytes(a);
    return a;
  }
%}

%typemap(javacode) acc_tensor_list %{
  /** Takes this list out of the tensor scope or loop over a loader that would close it: its caller
   *  closes it (and, for a batch, with it the tensors taken from it). */
  public TensorList keep() {
    swigMoveTo(null);
    return this;
  }
  // A batch owns the tensors taken from it: they close with it.
  void ownEntries() {
    if (swigEntries == null) swigEntries = new Owner();
  }
  private Tensor entry(Tensor t) {
    Owner entries = swigEntries;
    if (entries != null && t != null) t.swigMoveTo(entries);
    return t;
  }
  /** A new handle to entry {@code index}. Of a batch from a loop over a loader, it is the batch's
   *  and closes with it (unless kept); otherwise the caller closes it (or its tensor scope does). */
  public Tensor get(long index) {
    return entry(getEntry(index));
  }
  /** A new handle to the entry called {@code name}, owned as get's is. */
  public Tensor find(String name) {
    return entry(findEntry(name));
  }
  /** A list of unnamed entries (the list holds its own references). */
  public static TensorList of(Tensor... tensors) {
    TensorList list = new TensorList();
    for (Tensor t : tensors) list.append("", t);
    return list;
  }
  /** New handles to every entry; the caller closes them. */
  public Tensor[] toArray() {
    Tensor[] out = new Tensor[Math.toIntExact(size())];
    for (int i = 0; i < out.length; ++i) out[i] = get(i);
    return out;
  }
%}

%typemap(javacode) acc_string_list %{
  public java.util.List<String> toList() {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (long i = 0, n = size(); i < n; ++i) out.add(get(i));
    return out;
  }
  public byte[] getBytes(long index) {
    byte[] out = new byte[Math.toIntExact(byteSize(index))];
    copyBytes(index, out);
    return out;
  }
%}

%typemap(javacode) accswig::LoadReport %{
  public java.util.List<String> missingNames() {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (long i = 0; i < missingCount(); ++i) out.add(missing(i));
    return out;
  }
  public java.util.List<String> unexpectedNames() {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (long i = 0; i < unexpectedCount(); ++i) out.add(unexpected(i));
    return out;
  }
%}

%typemap(javacode) acc_options %{
  public static Options accelerator() { return new Options(OptionsKind.ACCELERATOR); }
  public static Options optimizer() { return new Options(OptionsKind.OPTIMIZER); }
  public static Options scheduler() { return new Options(OptionsKind.SCHEDULER); }
  public static Options dataLoader() { return new Options(OptionsKind.DATALOADER); }
  /** Options of Model.addLora (r, lora_alpha, use_rslora, use_dora, rank_pattern, ...: the keys of ACC_OPTIONS_LORA). */
  public static Options lora() { return new Options(OptionsKind.LORA); }
  /** Options of Accelerator.profile (Accelerate's ProfileKwargs: activities, schedule_*, record_shapes,
   *  profile_memory, with_flops, output_trace_dir, ...). */
  public static Options profile() { return new Options(OptionsKind.PROFILE); }
  /** Options of new AveragedModel (PyTorch's AveragedModel: strategy "swa" or "ema", decay,
   *  use_buffers, device). */
  public static Options averagedModel() { return new Options(OptionsKind.AVERAGED_MODEL); }
  /** Options of Model.addTrainableTokens (PEFT's TrainableTokensConfig: token_indices, init_weights, ...). */
  public static Options trainableTokens() { return new Options(OptionsKind.TRAINABLE_TOKENS); }
  /** Options of Model.addWeightedAdapter (PEFT's add_weighted_adapter keywords: density,
   *  majority_sign_method, svd_rank, svd_clamp, svd_full_matrices, svd_driver). */
  public static Options weightedAdapter() { return new Options(OptionsKind.WEIGHTED_ADAPTER); }
  /** Options of Model.initializeLoraEva (how EVA reads the batches: inputs, labels, attention_mask,
   *  gather_distributed_inputs, max_batches). */
  public static Options eva() { return new Options(OptionsKind.EVA); }
  /** Options of Model.addIa3 (PEFT's IA3Config: feedforward_modules, init_ia3_weights, ...). */
  public static Options ia3() { return new Options(OptionsKind.IA3); }
  /** Options of Model.addLoha (PEFT's LoHaConfig: r, alpha, rank_dropout, module_dropout, ...). */
  public static Options loha() { return new Options(OptionsKind.LOHA); }
  /** Options of Model.addLokr (PEFT's LoKrConfig: r, alpha, decompose_both, decompose_factor, ...). */
  public static Options lokr() { return new Options(OptionsKind.LOKR); }
  /** Options of Model.addVera (PEFT's VeraConfig: r, projection_prng_key, save_projection, ...). */
  public static Options vera() { return new Options(OptionsKind.VERA); }
  /** Options of Model.addOft (PEFT's OFTConfig: r or oft_block_size, coft, block_share, ...). */
  public static Options oft() { return new Options(OptionsKind.OFT); }
  /** Options of Model.addAdalora (PEFT's AdaLoraConfig: total_step, required; init_r, target_r,
   *  tinit, tfinal, deltaT, orth_reg_weight, ...). */
  public static Options adalora() { return new Options(OptionsKind.ADALORA); }
  /** Options of Model.addBoft (PEFT's BOFTConfig: boft_block_size or boft_block_num,
   *  boft_n_butterfly_factor, boft_dropout, init_weights, ...). */
  public static Options boft() { return new Options(OptionsKind.BOFT); }
  /** Options of Model.addHra (PEFT's HRAConfig: r, apply_GS, init_weights, bias, ...). */
  public static Options hra() { return new Options(OptionsKind.HRA); }
  /** Options of Model.addFourierft (PEFT's FourierFTConfig: n_frequency, scaling, random_loc_seed, ...). */
  public static Options fourierft() { return new Options(OptionsKind.FOURIERFT); }
  /** Options of Model.addLnTuning (PEFT's LNTuningConfig: exclude_modules, modules_to_save, ...). */
  public static Options lnTuning() { return new Options(OptionsKind.LN_TUNING); }
  /** Options of Model.addMiss (PEFT's MissConfig: r, miss_dropout, mini_r, init_weights, ...). */
  public static Options miss() { return new Options(OptionsKind.MISS); }
  /** Options of Model.addC3a (PEFT's C3AConfig: block_size, block_size_pattern, init_weights, ...). */
  public static Options c3a() { return new Options(OptionsKind.C3A); }
  /** Options of Model.addShira (PEFT's ShiraConfig: r, mask_type, random_seed, init_weights, ...). */
  public static Options shira() { return new Options(OptionsKind.SHIRA); }
  /** Options of Model.addRandlora (PEFT's RandLoraConfig: r, projection_prng_key, randlora_alpha, sparse, ...). */
  public static Options randlora() { return new Options(OptionsKind.RANDLORA); }
  /** Options of Model.addDelora (PEFT's DeloraConfig: r, delora_lambda, module_dropout, ...). */
  public static Options delora() { return new Options(OptionsKind.DELORA); }
  /** Options of Model.addRoad (PEFT's RoadConfig: variant, group_size, init_weights). */
  public static Options road() { return new Options(OptionsKind.ROAD); }
  /** Options of Model.addGralora (PEFT's GraloraConfig: r, hybrid_r, alpha, gralora_k, ...). */
  public static Options gralora() { return new Options(OptionsKind.GRALORA); }
  /** Options of Model.addHira (PEFT's HiraConfig: r, hira_dropout, init_weights, ...). */
  public static Options hira() { return new Options(OptionsKind.HIRA); }
  /** Options of Model.addPvera (PEFT's PveraConfig: r, pvera_dropout, sample_at_inference, ...). */
  public static Options pvera() { return new Options(OptionsKind.PVERA); }

  /** Sets a key from a Java value by its type (Integer/Long, Float/Double, Boolean, String). */
  public Options put(String key, Object value) {
    if (value instanceof Integer || value instanceof Long || value instanceof Short) setInt(key, ((Number) value).longValue());
    else if (value instanceof Float || value instanceof Double) setDouble(key, ((Number) value).doubleValue());
    else if (value instanceof Boolean) setBool(key, (Boolean) value);
    else if (value instanceof String) setString(key, (String) value);
    else throw new IllegalArgumentException("option " + key + ": unsupported value type " + value);
    return this;
  }
%}

%typemap(javacode) acc_model %{
  public static final long FORWARD_DEFAULT = NativeConstants.ACC_FORWARD_DEFAULT;
  public static final long FORWARD_NO_GRAD = NativeConstants.ACC_FORWARD_NO_GRAD;

  /** Forward on several inputs; outputs flattened into a list (see acc_model_forward). */
  public TensorList forward(long flags, Tensor... inputs) {
    try (TensorList in = TensorList.of(inputs)) {
      return forward(in, flags);
    }
  }
  /**
   * PEFT's forward with adapter_names (mixed batches, evaluation): sample i of the batch computes with
   * the named adapter adapterNames.get(i) ("__base__": none); see acc_model_forward_adapters.
   */
  public TensorList forwardAdapters(java.util.List<String> adapterNames, Tensor... inputs) {
    try (TensorList in = TensorList.of(inputs)) {
      return forwardAdapters(in, Args.nulJoined("forwardAdapters: the adapter name", adapterNames), FORWARD_NO_GRAD);
    }
  }
  /** Forward on one input with autograd recording. */
  public Tensor forward(Tensor input) { return forward1(input, FORWARD_DEFAULT); }
  /** Forward without recording autograd history (evaluation). */
  public Tensor forwardNoGrad(Tensor input) { return forward1(input, FORWARD_NO_GRAD); }
  /**
   * PEFT's {@code with model.disable_adapter():} for try-with-resources: the LoRA adapters stay disabled
   * (the adapted layers compute as the base model's) until the scope closes, which enables them again
   * unless they were disabled before.
   */
  public Scope disableLora() {
    boolean wasEnabled = isLoraEnabled();
    setLoraEnabled(false);
    return new Scope(() -> { if (wasEnabled) setLoraEnabled(true); });
  }
  /** PEFT's add_weighted_adapter: a new adapter, kept aside, combining `adapters` with one weight
   * each, combinationType "svd", "linear", "cat", "ties", "dare_linear", "dare_ties", "magnitude_prune"
   * or a pruning one with "_svd"; options (Options.weightedAdapter(), may be null): density,
   * majority_sign_method, svd_rank, svd_clamp, ... Returns how many layers it adapts. */
  public long addWeightedAdapter(java.util.List<String> adapters, double[] weights, String adapterName,
                                 String combinationType, Options options) {
    return addWeightedAdapter(Args.nulJoined("addWeightedAdapter: the adapter name", adapters), weights, adapterName,
                              combinationType, options);
  }
  /** PEFT's merge_and_unload(adapter_names=...): the named adapters merged into the weights in this
   *  order, then every adapter removed. */
  public void mergeLoraAdapters(java.util.List<String> adapters) {
    mergeLoraAdapters(Args.nulJoined("mergeLoraAdapters: the adapter name", adapters));
  }
  /** addWeightedAdapter with svd_rank alone (0: the largest of the adapters' ranks). */
  public long addWeightedAdapter(java.util.List<String> adapters, double[] weights, String adapterName,
                                 String combinationType, long svdRank) {
    try (Options options = Options.weightedAdapter()) {
      options.setInt("svd_rank", svdRank);
      return addWeightedAdapter(adapters, weights, adapterName, combinationType, options);
    }
  }
%}

%typemap(javacode) acc_optimizer %{
  public void addParamGroup(java.util.List<String> names, Options overrides) {
    addParamGroup(Args.nulJoined("addParamGroup: the parameter name", names), overrides);
  }
%}

%typemap(javacode) acc_dataset %{
  /** A map-style dataset of `size` samples; `fn` returns sample i's fields, which the dataset
   *  takes over (closes). `fn` may run on loader threads. */
  public static Dataset fromCallback(long size, SampleFunction fn) {
    return fromSampleSource(size, CallbackAdapters.sample(fn));
  }
  /** An iterable dataset (a stream); sizeHint -1 when unknown. */
  public static Dataset fromIterator(StreamFunction fn, long sizeHint) {
    return fromStreamSource(CallbackAdapters.stream(fn), sizeHint);
  }
%}

%typemap(javacode) accswig::Library %{
  /** Accelerate's find_executable_batch_size: runs fn with startingBatchSize and, while it throws
   *  OutOfMemoryException, again with 90% of the batch size (rounded down); returns the batch size
   *  that ran. Another exception from fn ends the search: the library's as it was thrown, any other
   *  as an AccelerateIOException with its message. OutOfMemoryException when no batch size down to 1 fits. */
  public static long findExecutableBatchSize(long startingBatchSize, BatchSizeFunction fn) {
    if (fn == null) throw new NullPointerException("fn");
    BatchSizeRun run = CallbackAdapters.batchSizeRun(fn);
    try {
      return findBatchSizeWith(startingBatchSize, run);
    } finally {
      run.delete();
    }
  }
%}

%typemap(javacode) acc_scheduler %{
  /** PyTorch's LambdaLR: lr = base_lr * fn.factor(step), at creation (step 0) and every step. */
  public static Scheduler fromLambda(Optimizer opt, LrLambdaFunction fn) {
    return fromLrLambda(opt, CallbackAdapters.lrLambda(fn));
  }
  /** PyTorch's MultiplicativeLR: lr = the rate before * fn.factor(step), at every step from step 1. */
  public static Scheduler fromMultiplicative(Optimizer opt, LrLambdaFunction fn) {
    return fromLrMultiplicative(opt, CallbackAdapters.lrLambda(fn));
  }
  /** PyTorch's LambdaLR(opt, [fn0, fn1, ...]): group g's lr = its base_lr * fns.get(g).factor(step),
   *  one function per parameter group (another count is refused), called in group order. */
  public static Scheduler fromLambdas(Optimizer opt, java.util.List<? extends LrLambdaFunction> fns) {
    GroupLrLambda each = CallbackAdapters.groupLrLambda(fns);  // checks fns first
    return fromGroupLrLambda(opt, fns.size(), each);
  }
  /** PyTorch's MultiplicativeLR(opt, [fn0, fn1, ...]): group g's lr = its rate before * fns.get(g).factor(step). */
  public static Scheduler fromMultiplicatives(Optimizer opt, java.util.List<? extends LrLambdaFunction> fns) {
    GroupLrLambda each = CallbackAdapters.groupLrLambda(fns);  // checks fns first
    return fromGroupLrMultiplicative(opt, fns.size(), each);
  }
  /** PyTorch's CyclicLR with scale_fn: opts as the "cyclic" schedule's (scale_mode "cycle" or
   *  "iterations"; no mode or gamma); scale.factor(x) scales the height of cycle x (from 1) or step x. */
  public static Scheduler fromCyclic(Optimizer opt, Options opts, LrLambdaFunction scale) {
    return fromCyclicScale(opt, opts, CallbackAdapters.lrLambda(scale));
  }
%}

%typemap(javacode) acc_dataloader %{
  /** A loader over a batch sampler's batches (Accelerate's batch_sampler): batch k holds the dataset
   *  indices batches[k], yielded in this order every epoch; sizes may vary. opts may be null;
   *  batch_size, shuffle and drop_last are refused (the batches decide them). */
  public static DataLoader fromBatches(Dataset ds, long[][] batches, Options opts) {
    java.util.Objects.requireNonNull(batches, "batches");
    long[] sizes = new long[batches.length];
    int total = 0;
    for (int k = 0; k < batches.length; ++k) {
      java.util.Objects.requireNonNull(batches[k], "batch " + k);
      sizes[k] = batches[k].length;
      total = Math.addExact(total, batches[k].length);
    }
    long[] indices = new long[total];
    for (int k = 0, at = 0; k < batches.length; at += batches[k].length, ++k)
      System.arraycopy(batches[k], 0, indices, at, batches[k].length);
    return fromBatchArrays(ds, indices, sizes, opts);
  }
  public static DataLoader fromBatches(Dataset ds, java.util.List<long[]> batches, Options opts) {
    java.util.Objects.requireNonNull(batches, "batches");
    return fromBatches(ds, batches.toArray(new long[0][]), opts);
  }

  /** Batches are made by `fn` instead of by stacking. */
  public void setCollate(CollateFunction fn) {
    setCollator(CallbackAdapters.collate(fn));
  }

  /** A pass over an epoch, which owns the batch it handed out last (see Batches). An earlier pass
   *  of this loader is closed first, and an epoch left unfinished (a loop left with break, or next()
   *  called by hand) is ended, so every pass starts at an epoch's beginning (or where load_state or
   *  skipFirstBatches put it). The loader's close closes its pass. A pass is the epoch's iterator:
   *  making one takes what Python's iter(loader) takes (iter()), so passes read in step draw as zip. */
  public Batches batches() {
    // The epoch ends first, without the proxy's lock (it waits for the worker threads, whose
    // functions may use the proxy): refused (from inside the loader's own function), the running
    // pass goes on unharmed.
    endEpoch();
    Batches pass = new Batches(this);
    Owner holder = new Owner();
    holder.add(pass);
    Owner previous;
    Batches previousPass;
    synchronized (this) {
      previous = swigEntries;
      swigEntries = holder;
      previousPass = currentPass;
      currentPass = pass;
    }
    if (previousPass != null) previousPass.supersede();
    if (previous != null) previous.closeAll();
    // Python's iter(loader): the pass is the iterator (two passes read in step draw as zip's).
    iter();
    return pass;
  }
  private transient Batches currentPass;

  /** The batches of an epoch: {@code for (TensorList batch : loader)} runs on batches(). */
  @Override
  public java.util.Iterator<TensorList> iterator() {
    return batches();
  }
%}

%typemap(javacode) acc_accelerator %{
  public Model prepare(Model model) { return prepareModel(model, Placement.DEFAULT); }
  public Optimizer prepare(Optimizer opt) { return prepareOptimizer(opt, Placement.DEFAULT); }
  public DataLoader prepare(DataLoader loader) { return prepareDataLoader(loader, Placement.DEFAULT); }
  public Scheduler prepare(Scheduler sched) { return prepareScheduler(sched); }

  /** {@code try (Scope s = acc.accumulate()) { ... }}: one micro-step of gradient accumulation. */
  public Scope accumulate() {
    accumulateBegin();
    return new Scope(this::accumulateEnd);
  }
  /** Gradients accumulate locally, without the allreduce, inside the scope. */
  public Scope noSync(Model model) {
    noSyncBegin(model);
    return new Scope(() -> noSyncEnd(model));
  }
  /** Accelerate's profile(): {@code try (Profile p = acc.profile(Options.profile().put("output_trace_dir", dir))) {
   *  ...; p.step(); }}: torch's profiler records this thread's operators until close(), which writes
   *  output_trace_dir/profile_<process index>.json; profileSummary() is then the operators' table.
   *  opts may be null (the defaults). */
  public Profile profile(Options opts) {
    profileBegin(opts);
    return new Profile(this::profileStep, this::profileEnd);
  }
  public Profile profile() { return profile(null); }
  /** Accelerate's LocalSGD: {@code try (LocalSgd l = acc.localSgd(model, 8)) { ...; opt.step(); l.step(); }}
   *  Each process steps on its own gradients; every localSgdSteps-th step() and close() average the
   *  parameters over the processes. */
  public LocalSgd localSgd(Model model, long localSgdSteps) { return localSgd(model, localSgdSteps, true); }
  public LocalSgd localSgd(Model model, long localSgdSteps, boolean enabled) {
    localSgdBegin(model, localSgdSteps, enabled);
    return new LocalSgd(() -> localSgdStep(model), () -> localSgdEnd(model));
  }
  /** Accelerate's join_uneven_inputs: processes may run different numbers of training steps of the
   *  model inside the scope; closing it where a process's data has ended joins the others until all
   *  have ended, then every replica takes the weights of one that trained to the end. */
  public Scope joinUnevenInputs(Model model) {
    joinUnevenInputsBegin(model, -1);
    return new Scope(() -> joinUnevenInputsEnd(model));
  }
  /** The same, with every prepared map-style loader's even_batches set to evenBatches until the end. */
  public Scope joinUnevenInputs(Model model, boolean evenBatches) {
    joinUnevenInputsBegin(model, evenBatches ? 1 : 0);
    return new Scope(() -> joinUnevenInputsEnd(model));
  }
  /** The main process runs the scope first; the others wait for it. */
  public Scope mainProcessFirst() {
    mainProcessFirstBegin();
    return new Scope(this::mainProcessFirstEnd);
  }
  public Scope localMainProcessFirst() {
    localMainProcessFirstBegin();
    return new Scope(this::localMainProcessFirstEnd);
  }
  /** Every process's bytes, in rank order. */
  public java.util.List<byte[]> gatherObject(byte[] data, String name) {
    try (StringList list = gatherObjectList(data, name == null ? "" : name)) {
      java.util.List<byte[]> out = new java.util.ArrayList<>();
      for (long i = 0, n = list.size(); i < n; ++i) out.add(list.getBytes(i));
      return out;
    }
  }
  /** Process src's bytes on every process (the others' data is not read; it may be null). */
  public byte[] broadcastObject(byte[] data, long src, String name) {
    try (StringList list = broadcastObjectList(data == null ? new byte[0] : data, src, name == null ? "" : name)) {
      return list.getBytes(0);
    }
  }
  /** Accelerate's register_for_checkpointing: the object's bytes go into every checkpoint. */
  public void registerForCheckpointing(CheckpointState state) {
    registerForCheckpointing(CallbackAdapters.state(state));
  }
  /** Runs hook with the checkpoint's folder (files written there become part of the checkpoint) before
   *  saveState writes; an exception aborts the save on every process.
   *  The handle removes the hook again (Accelerate's RemovableHandle). */
  public RemovableHandle registerSaveStatePreHook(CheckpointHookFunction hook) {
    return new RemovableHandle(this, registerSaveStatePreHook(CallbackAdapters.hook(hook)));
  }
  /** Runs hook with the folder before loadState reads; an exception aborts the load on every process. */
  public RemovableHandle registerLoadStatePreHook(CheckpointHookFunction hook) {
    return new RemovableHandle(this, registerLoadStatePreHook(CallbackAdapters.hook(hook)));
  }
  /** Accelerate's register_save_state_pre_hook(hook(models, weights, dir)): runs hook with the models
   *  whose weights the library will save, and the checkpoint's folder (files written there become part
   *  of the checkpoint); a hook that saves a model's weights itself takes it out. */
  public RemovableHandle registerSaveStatePreHook(CheckpointModelsHookFunction hook) {
    return new RemovableHandle(this, registerSaveStateModelsPreHook(CallbackAdapters.modelsHook(hook)));
  }
  /** Accelerate's register_load_state_pre_hook(hook(models, dir)): a hook takes out the models it loads
   *  itself, those a save hook took out. */
  public RemovableHandle registerLoadStatePreHook(CheckpointModelsHookFunction hook) {
    return new RemovableHandle(this, registerLoadStateModelsPreHook(CallbackAdapters.modelsHook(hook)));
  }
  /** Accelerate's ProfileKwargs(on_trace_ready=handler), for every later profile: runs with the step at
   *  which each recorded cycle ends; profileSummary and exportChromeTrace read that cycle in it. An
   *  exception fails that profile step or end (AccelerateIOException). */
  public void onTraceReady(TraceReadyFunction handler) {
    onTraceReady(CallbackAdapters.traceReady(handler));
  }
  public void addTracker(String name, TrackerCallbacks tracker) {
    // The name first: a tracker refused before the library takes it would never be released.
    addTracker(Args.noNul("addTracker: the name", name), CallbackAdapters.tracker(tracker));
  }
  /** Accelerate's backward(loss, retain_graph=..., create_graph=...): retainGraph keeps the graph for
   *  another backward through it; createGraph gives gradients a graph of their own (and keeps it). */
  public void backward(Tensor loss, boolean retainGraph, boolean createGraph) {
    backwardWith(loss, retainGraph, createGraph);
  }
  /** Accelerate's init_trackers(project_name, config, init_kwargs): initKwargsJson is a JSON object
   *  from tracker names to their keyword arguments, e.g. {"mlflow": {"run_name": "baseline"}}. */
  public void initTrackers(String project, String configJson, String initKwargsJson) {
    initTrackersWith(project, configJson, initKwargsJson);
  }
  /** torch's SummaryWriter.add_histogram: the histogram of values' numbers at step (negative: the
   *  step after the last one), in TensorBoard's HISTOGRAMS dashboard. bins null is "tensorflow"
   *  (SummaryWriter's default bins), else a number of equal-width bins ("64"); maxBins 0 for no limit. */
  public void logHistogram(String name, Tensor values, long step, String bins, long maxBins) {
    logHistogramWith(Args.noNul("logHistogram: the name", name), values, step, bins, maxBins);
  }
  public void logHistogram(String name, Tensor values, long step) { logHistogram(name, values, step, null, 0); }
  /** Accelerate's log: values by name at step, or at the step after the last one when step is negative. */
  public void log(java.util.Map<String, Double> values, long step) {
    log(values, step, null);
  }
  /** log with Accelerate's log_kwargs: a JSON object from tracker names to the keyword arguments of
   *  their log, e.g. {"tensorboard": {"walltime": 1700000000.5}} (null for none). */
  public void log(java.util.Map<String, Double> values, long step, String logKwargsJson) {
    String[] names = java.util.Objects.requireNonNull(values, "values").keySet().toArray(new String[0]);
    logValues(Args.nulJoined("log: the metric name", names), valuesOf("log", values, names), step, logKwargsJson);
  }
  /* Each name's value; a null one is refused naming it, as a null name is. */
  private static double[] valuesOf(String what, java.util.Map<String, Double> values, String[] names) {
    double[] data = new double[names.length];
    for (int i = 0; i < names.length; ++i) {
      Double value = values.get(names[i]);
      if (value == null) throw new InvalidArgumentException(what + ": the value of '" + names[i] + "' is null");
      data[i] = value;
    }
    return data;
  }
  /** Accelerate's log of a dict value (TensorBoard's add_scalars): values by name under mainTag, at
   *  step or at the step after the last one when step is negative. TensorBoard draws them in one
   *  chart; the other trackers get "mainTag/name". */
  public void logScalars(String mainTag, java.util.Map<String, Double> values, long step) {
    logScalars(mainTag, values, step, null);
  }
  /** logScalars with Accelerate's log_kwargs (as log's; TensorBoard's add_scalars takes walltime alone). */
  public void logScalars(String mainTag, java.util.Map<String, Double> values, long step, String logKwargsJson) {
    String[] names = java.util.Objects.requireNonNull(values, "values").keySet().toArray(new String[0]);
    logGroup(mainTag, Args.nulJoined("logScalars: the name", names), valuesOf("logScalars", values, names), step,
             logKwargsJson);
  }
  /** Accelerate's log of str values (TensorBoard's add_text): texts by name at step, or at the step
   *  after the last one when step is negative. Program trackers get them through their logText. */
  public void logText(java.util.Map<String, String> texts, long step) {
    logText(texts, step, null);
  }
  /** logText with Accelerate's log_kwargs (as log's; TensorBoard's add_text takes walltime alone). */
  public void logText(java.util.Map<String, String> texts, long step, String logKwargsJson) {
    String[] names = java.util.Objects.requireNonNull(texts, "texts").keySet().toArray(new String[0]);
    String[] values = new String[names.length];
    for (int i = 0; i < names.length; ++i) values[i] = texts.get(names[i]);
    logTexts(Args.nulJoined("logText: the name", names), Args.nulJoined("logText: the text", values), step,
             logKwargsJson);
  }
  public void logText(String name, String text, long step) {
    logText(java.util.Collections.singletonMap(name, text), step);
  }
  /** Accelerate's TensorBoardTracker.log_images (torch's add_images): images by name at step, or at
   *  the step after the last one when step is negative; dataformats null is "NCHW" (a batch shown as
   *  a grid), else an order of NCHW, CHW or HW. Only TensorBoard shows them. */
  public void logImages(java.util.Map<String, Tensor> images, long step, String dataformats) {
    String[] names = java.util.Objects.requireNonNull(images, "images").keySet().toArray(new String[0]);
    Tensor[] tensors = new Tensor[names.length];
    for (int i = 0; i < names.length; ++i) tensors[i] = images.get(names[i]);
    try (TensorList list = TensorList.of(tensors)) {
      logImages(Args.nulJoined("logImages: the name", names), list, step, dataformats);
    }
  }
  public void logImages(String name, Tensor images, long step, String dataformats) {
    logImages(java.util.Collections.singletonMap(name, images), step, dataformats);
  }
  /** {@code try (Scope s = acc.autocast(true)) { ... }}: mixed precision for code that is not a
   *  prepared model (false: autocast off); it must end on the thread it began on. */
  public Scope autocast(boolean enabled) {
    autocastBegin(enabled);
    return new Scope(this::autocastEnd);
  }
  /** This process's share {start, end, padding} of n items. */
  public long[] splitBetweenProcesses(long n, boolean applyPadding) {
    long[] out = new long[3];
    splitBetweenProcesses(n, applyPadding, out);
    return out;
  }
%}

/* csharp.i — C# specifics of accelerate.i: errors become Accelerate.*Exception in the native call
 * that failed (SWIG's pending-exception slot, filled through a registered delegate), arrays are C#
 * arrays, member names are PascalCase, and the proxies are partial classes that the hand-written
 * layer (bindings/csharp/src) completes. Proxies are IDisposable (SWIG's default) with SWIG's
 * finalizer as the backstop; a disposed proxy passes a null handle, which the library rejects. */

/* Sizes and indices are long, as in Java (C#'s int does not convert to SWIG's uint implicitly). */
%apply long long { size_t };
/* A negative one is refused by its own value, instead of reaching the library as a number near 2^64. */
%typemap(csin) size_t "Arg.NotNegative($csinput, \"$csinput\")"

/* ---- errors ------------------------------------------------------------------------------------ */

%insert(runtime) %{
typedef void (SWIGSTDCALL *AccelerateRaiseFn)(int code, const char *message);
static AccelerateRaiseFn accswig_cs_raise = 0;
#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL AccelerateRegisterRaise(AccelerateRaiseFn fn) { accswig_cs_raise = fn; }
%}

%exception {
  try {
    $action
    accswig::closed_receiver() = nullptr;
  } catch (const accswig::Error &e) {
    accswig_cs_raise((int)e.code, accswig::error_message(e, "disposed").c_str());
    return $null;
  } catch (const std::exception &e) {
    accswig::closed_receiver() = nullptr;
    accswig_cs_raise((int)ACC_ERR_INTERNAL, e.what());
    return $null;
  }
}

/* The raise delegate is registered, and the ABI checked, by the intermediary class's static
 * initialisers, which run before its first native call. */
%pragma(csharp) imclasscode=%{
  internal sealed class RaiseHelper {
    internal delegate void RaiseDelegate(int code, string message);
    static readonly RaiseDelegate raise = Raise;  // a static field: never collected while registered

    [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="AccelerateRegisterRaise")]
    static extern void Register(RaiseDelegate fn);

    static void Raise(int code, string message) {
      SWIGPendingException.Set(AccelerateException.FromStatus((Status)code, message));
    }

    internal RaiseHelper() { Register(raise); }
  }
  internal static readonly RaiseHelper raiseHelper = new RaiseHelper();
  internal static readonly bool abiChecked = NativeLoader.CheckAbi();
%}

/* A method of a disposed proxy (its handle is null) fails naming the object disposed (see closed_receiver). */
%typemap(check, noblock=1) SWIGTYPE *self { accswig::note_receiver($1, "$*1_ltype"); }

/* ---- strings: the C API takes NUL-terminated text, so one holding '\0' is refused, never cut short */
%typemap(csin) const char * "AccelerateException.NoNul($csinput)"

/* ---- arrays: passed as C arrays for the call (blittable, so pinned, not copied) ---------------- */

%define ACC_CS_ARRAY(CTYPE, CSTYPE)
%typemap(ctype) const CTYPE *data, CTYPE *dst "CTYPE *"
%typemap(imtype, inattributes="[global::System.Runtime.InteropServices.In, global::System.Runtime.InteropServices.MarshalAs(global::System.Runtime.InteropServices.UnmanagedType.LPArray)]") const CTYPE *data "CSTYPE[]"
%typemap(imtype, inattributes="[global::System.Runtime.InteropServices.In, global::System.Runtime.InteropServices.Out, global::System.Runtime.InteropServices.MarshalAs(global::System.Runtime.InteropServices.UnmanagedType.LPArray)]") CTYPE *dst "CSTYPE[]"
%typemap(cstype) const CTYPE *data, CTYPE *dst "CSTYPE[]"
%typemap(csin) const CTYPE *data, CTYPE *dst "$csinput"
%typemap(in) const CTYPE *data, CTYPE *dst %{ $1 = ($1_ltype)$input; %}
%enddef
ACC_CS_ARRAY(float, float)
ACC_CS_ARRAY(double, double)
ACC_CS_ARRAY(int64_t, long)
ACC_CS_ARRAY(int32_t, int)
ACC_CS_ARRAY(uint8_t, byte)
%apply const uint8_t *data { const uint8_t *names }
%apply const uint8_t *data { const uint8_t *texts }
%apply const int64_t *data { const int64_t *shape }
%apply const int64_t *data { const int64_t *sizes }
%apply const int64_t *data { const int64_t *dims }

/* ---- handle proxies: SWIG's body and Dispose, plus ownership (tensor scopes, batches) ---------- */

%define ACC_CS_HANDLE(CTYPE, TRACKED)
%typemap(csbody) CTYPE %{
  private global::System.Runtime.InteropServices.HandleRef swigCPtr;
  protected bool swigCMemOwn;
  // Who disposes this object besides its caller: a tensor scope, a batch (for the tensors taken from
  // it) or a pass over a loader (for its current batch); null when only the caller does.
  Owner swigOwner;
  // What this object disposes with itself: a batch's tensors, a loader's current pass.
  internal Owner swigEntries;

  internal $csclassname(global::System.IntPtr cPtr, bool cMemoryOwn) {
    swigCMemOwn = cMemoryOwn;
    swigCPtr = new global::System.Runtime.InteropServices.HandleRef(this, cPtr);
    if (cMemoryOwn && cPtr != global::System.IntPtr.Zero) MoveTo(Tensors.CurrentFor(TRACKED));
  }

  // A disposed object passed as an argument is named as disposed (the library would call it NULL).
  internal static global::System.Runtime.InteropServices.HandleRef getCPtr($csclassname obj) {
    if (obj == null) return new global::System.Runtime.InteropServices.HandleRef(null, global::System.IntPtr.Zero);
    global::System.Runtime.InteropServices.HandleRef cPtr = obj.swigCPtr;
    if (cPtr.Handle == global::System.IntPtr.Zero) throw new AccelerateInvalidHandleException("a disposed $csclassname was passed");
    return cPtr;
  }

  // Hands the object to `owner` (null: to its caller alone).
  internal void MoveTo(Owner owner) {
    Owner old;
    lock (this) {
      old = swigOwner;
      swigOwner = owner;
    }
    if (old != null) old.Remove(this);
    if (owner != null) owner.Add(this);
  }

  // Set when Dispose begins: what it disposes with itself sees the object as disposed (a loader's
  // pass then does not end an epoch that another thread may be iterating).
  bool swigDisposing;

  /// <summary>Whether Dispose was called (or the object was never owned).</summary>
  public bool IsDisposed {
    get { lock (this) { return swigDisposing || swigCPtr.Handle == global::System.IntPtr.Zero; } }
  }
%}
%typemap(csdisposing, methodname="Dispose", methodmodifiers="protected", parameters="bool disposing") CTYPE {
    // Finalized while the runtime shuts down, objects go in any order: freeing one could call back
    // into an adapter finalized before it. The process is ending; the memory goes with it.
    if (!disposing && global::System.Environment.HasShutdownStarted) return;
    Owner entries = null;
    lock (this) swigDisposing = true;
    if (disposing) {
      lock (this) {
        entries = swigEntries;
        swigEntries = null;
      }
      MoveTo(null);
    }
    try {
      if (entries != null) entries.DisposeAll();
    } finally {
      // Taken out under the lock, freed outside it: freeing a loader waits for its worker threads,
      // whose functions may use this proxy meanwhile (IsDisposed).
      global::System.Runtime.InteropServices.HandleRef owned = new global::System.Runtime.InteropServices.HandleRef(null, global::System.IntPtr.Zero);
      lock (this) {
        if (swigCPtr.Handle != global::System.IntPtr.Zero && swigCMemOwn) owned = swigCPtr;
        swigCMemOwn = false;
        swigCPtr = new global::System.Runtime.InteropServices.HandleRef(null, global::System.IntPtr.Zero);
      }
      if (owned.Handle != global::System.IntPtr.Zero) $imclassname.delete_$csclassname(owned);
    }
  }
%enddef

ACC_CS_HANDLE(acc_tensor, true)
ACC_CS_HANDLE(acc_tensor_list, true)
ACC_CS_HANDLE(acc_string_list, false)
ACC_CS_HANDLE(acc_options, false)
ACC_CS_HANDLE(acc_model, false)
ACC_CS_HANDLE(acc_optimizer, false)
ACC_CS_HANDLE(acc_scheduler, false)
ACC_CS_HANDLE(acc_averaged_model, false)
ACC_CS_HANDLE(acc_dataset, false)
ACC_CS_HANDLE(acc_dataloader, false)
ACC_CS_HANDLE(acc_accelerator, false)
ACC_CS_HANDLE(acc_progress, false)
ACC_CS_HANDLE(accswig::LoadReport, false)

/* Cheap getters are properties (bindings/csharp/src/Properties.cs) over these internal methods. */
%rename(GetNdim) acc_tensor::ndim_;
%csmethodmodifiers acc_tensor::ndim_ "internal";
/* Its count comes from the array (Tensor.Reshape(params long[])): a separate one could read past it. */
%csmethodmodifiers acc_tensor::reshape_ "internal";
%rename(GetNumel) acc_tensor::numel_;
%csmethodmodifiers acc_tensor::numel_ "internal";
%rename(GetDType) acc_tensor::dtype_;
%csmethodmodifiers acc_tensor::dtype_ "internal";
%rename(GetDevice) acc_tensor::device_;
%csmethodmodifiers acc_tensor::device_ "internal";
%rename(GetRequiresGrad) acc_tensor::requiresGrad;
%csmethodmodifiers acc_tensor::requiresGrad "internal";
%rename(GetCount) acc_tensor_list::size_;
%csmethodmodifiers acc_tensor_list::size_ "internal";
%rename(GetCount) acc_string_list::size_;
%csmethodmodifiers acc_string_list::size_ "internal";
%rename(GetCount) acc_dataset::size_;
%csmethodmodifiers acc_dataset::size_ "internal";
%rename(GetLength) acc_dataloader::length_;
%csmethodmodifiers acc_dataloader::length_ "internal";
%rename(GetEpoch) acc_dataloader::epoch_;
%csmethodmodifiers acc_dataloader::epoch_ "internal";
%rename(NextBatch) acc_dataloader::next_;
%csmethodmodifiers acc_dataloader::next_ "internal";
%rename(GetInEpoch) acc_dataloader::inEpoch;
%csmethodmodifiers acc_dataloader::inEpoch "internal";
%rename(GetEndOfEpoch) acc_dataloader::endOfEpoch;
%csmethodmodifiers acc_dataloader::endOfEpoch "internal";
%rename(GetTotalBatchSize) acc_dataloader::totalBatchSize;
%csmethodmodifiers acc_dataloader::totalBatchSize "internal";
%rename(GetTotalDatasetLength) acc_dataloader::totalDatasetLength;
%csmethodmodifiers acc_dataloader::totalDatasetLength "internal";
%rename(GetIsTraining) acc_model::isTraining;
%csmethodmodifiers acc_model::isTraining "internal";
%rename(GetParameterTensorCount) acc_model::parameterTensorCount;
%csmethodmodifiers acc_model::parameterTensorCount "internal";
%rename(GetParameterElementCount) acc_model::parameterElementCount;
%csmethodmodifiers acc_model::parameterElementCount "internal";
%rename(GetLoraCount) acc_model::loraCount;
%csmethodmodifiers acc_model::loraCount "internal";
%rename(GetIsLoraEnabled) acc_model::isLoraEnabled;
%csmethodmodifiers acc_model::isLoraEnabled "internal";
%rename(GetActiveAdapter) acc_model::activeAdapter;
%csmethodmodifiers acc_model::activeAdapter "internal";
%rename(GetNumParamGroups) acc_optimizer::numParamGroups;
%csmethodmodifiers acc_optimizer::numParamGroups "internal";
%rename(GetCount) acc_averaged_model::count_;
%csmethodmodifiers acc_averaged_model::count_ "internal";
%rename(GetDevice) acc_accelerator::device_;
%csmethodmodifiers acc_accelerator::device_ "internal";
%rename(GetDistributedType) acc_accelerator::distributedType;
%csmethodmodifiers acc_accelerator::distributedType "internal";
%rename(GetMixedPrecision) acc_accelerator::mixedPrecision;
%csmethodmodifiers acc_accelerator::mixedPrecision "internal";
%rename(GetProcessIndex) acc_accelerator::processIndex;
%csmethodmodifiers acc_accelerator::processIndex "internal";
%rename(GetNumProcesses) acc_accelerator::numProcesses;
%csmethodmodifiers acc_accelerator::numProcesses "internal";
%rename(GetLocalProcessIndex) acc_accelerator::localProcessIndex;
%csmethodmodifiers acc_accelerator::localProcessIndex "internal";
%rename(GetIsMainProcess) acc_accelerator::isMainProcess;
%csmethodmodifiers acc_accelerator::isMainProcess "internal";
%rename(GetIsLocalMainProcess) acc_accelerator::isLocalMainProcess;
%csmethodmodifiers acc_accelerator::isLocalMainProcess "internal";
%rename(GetIsLastProcess) acc_accelerator::isLastProcess;
%csmethodmodifiers acc_accelerator::isLastProcess "internal";
%rename(GetGradientAccumulationSteps) acc_accelerator::gradientAccumulationSteps;
%csmethodmodifiers acc_accelerator::gradientAccumulationSteps "internal";
%rename(GetSyncGradients) acc_accelerator::syncGradients;
%csmethodmodifiers acc_accelerator::syncGradients "internal";
%rename(GetOptimizerStepWasSkipped) acc_accelerator::optimizerStepWasSkipped;
%csmethodmodifiers acc_accelerator::optimizerStepWasSkipped "internal";
%rename(GetStep) acc_accelerator::step_;
%csmethodmodifiers acc_accelerator::step_ "internal";
%rename(GetIteration) acc_accelerator::iteration_;
%csmethodmodifiers acc_accelerator::iteration_ "internal";

/* A batch's Get/Find hand their tensors to the batch (TensorList.Get in bindings/csharp/src). */
%rename(GetEntry) acc_tensor_list::get_;
%rename(FindEntry) acc_tensor_list::find_;
%csmethodmodifiers acc_tensor_list::get_ "internal";
%csmethodmodifiers acc_tensor_list::find_ "internal";

/* ---- names and classes --------------------------------------------------------------------------- */

/* PascalCase enum members (Reduction.Mean, DType.Float32, Status.InvalidArgument). C enum items share the
 * classes' scope in SWIG: handle and options kinds are named as in Go (HandleKind.HandleTensor,
 * OptionsKind.OptimizerOptions), not after the classes. */
%rename(Ok) ACC_OK;
%rename(InvalidArgument) ACC_ERR_INVALID_ARGUMENT;
%rename(InvalidHandle) ACC_ERR_INVALID_HANDLE;
%rename(NotInitialized) ACC_ERR_NOT_INITIALIZED;
%rename(Unsupported) ACC_ERR_UNSUPPORTED;
%rename(OutOfMemory) ACC_ERR_OUT_OF_MEMORY;
%rename(Timeout) ACC_ERR_TIMEOUT;
%rename(Aborted) ACC_ERR_ABORTED;
%rename(Distributed) ACC_ERR_DISTRIBUTED;
%rename(IO) ACC_ERR_IO;
%rename(VersionMismatch) ACC_ERR_VERSION_MISMATCH;
%rename(Internal) ACC_ERR_INTERNAL;
%rename(Undefined) ACC_DTYPE_UNDEFINED;
%rename(Float32) ACC_DTYPE_FLOAT32;
%rename(Float64) ACC_DTYPE_FLOAT64;
%rename(BFloat16) ACC_DTYPE_BFLOAT16;
%rename(Float16) ACC_DTYPE_FLOAT16;
%rename(Int64) ACC_DTYPE_INT64;
%rename(Int32) ACC_DTYPE_INT32;
%rename(UInt8) ACC_DTYPE_UINT8;
%rename(Bool) ACC_DTYPE_BOOL;
%rename(Int8) ACC_DTYPE_INT8;
%rename(Int16) ACC_DTYPE_INT16;
%rename(None) ACC_REDUCTION_NONE;
%rename(Mean) ACC_REDUCTION_MEAN;
%rename(Sum) ACC_REDUCTION_SUM;
%rename(HandleAny) ACC_HANDLE_ANY;
%rename(HandleTensor) ACC_HANDLE_TENSOR;
%rename(HandleTensorList) ACC_HANDLE_TENSOR_LIST;
%rename(HandleStringList) ACC_HANDLE_STRING_LIST;
%rename(HandleOptions) ACC_HANDLE_OPTIONS;
%rename(HandleModel) ACC_HANDLE_MODEL;
%rename(HandleOptimizer) ACC_HANDLE_OPTIMIZER;
%rename(HandleScheduler) ACC_HANDLE_SCHEDULER;
%rename(HandleDataset) ACC_HANDLE_DATASET;
%rename(HandleDataLoader) ACC_HANDLE_DATALOADER;
%rename(HandleAccelerator) ACC_HANDLE_ACCELERATOR;
%rename(HandleProgress) ACC_HANDLE_PROGRESS;
%rename(HandleBytes) ACC_HANDLE_BYTES;
%rename(HandleAveragedModel) ACC_HANDLE_AVERAGED_MODEL;
%rename(HandleCheckpointModels) ACC_HANDLE_CHECKPOINT_MODELS;
%rename(OptimizerOptions) ACC_OPTIONS_OPTIMIZER;
%rename(SchedulerOptions) ACC_OPTIONS_SCHEDULER;
%rename(DataLoaderOptions) ACC_OPTIONS_DATALOADER;
%rename(AcceleratorOptions) ACC_OPTIONS_ACCELERATOR;
%rename(LoraOptions) ACC_OPTIONS_LORA;
%rename(ProfileOptions) ACC_OPTIONS_PROFILE;
%rename(AveragedModelOptions) ACC_OPTIONS_AVERAGED_MODEL;
%rename(TrainableTokensOptions) ACC_OPTIONS_TRAINABLE_TOKENS;
%rename(WeightedAdapterOptions) ACC_OPTIONS_WEIGHTED_ADAPTER;
%rename(EvaOptions) ACC_OPTIONS_EVA;
%rename(Ia3Options) ACC_OPTIONS_IA3;
%rename(LohaOptions) ACC_OPTIONS_LOHA;
%rename(LokrOptions) ACC_OPTIONS_LOKR;
%rename(VeraOptions) ACC_OPTIONS_VERA;
%rename(OftOptions) ACC_OPTIONS_OFT;
%rename(AdaloraOptions) ACC_OPTIONS_ADALORA;
%rename(BoftOptions) ACC_OPTIONS_BOFT;
%rename(HraOptions) ACC_OPTIONS_HRA;
%rename(FourierftOptions) ACC_OPTIONS_FOURIERFT;
%rename(LnTuningOptions) ACC_OPTIONS_LN_TUNING;
%rename(MissOptions) ACC_OPTIONS_MISS;
%rename(C3aOptions) ACC_OPTIONS_C3A;
%rename(ShiraOptions) ACC_OPTIONS_SHIRA;
%rename(RandloraOptions) ACC_OPTIONS_RANDLORA;
%rename(DeloraOptions) ACC_OPTIONS_DELORA;
%rename(RoadOptions) ACC_OPTIONS_ROAD;
%rename(GraloraOptions) ACC_OPTIONS_GRALORA;
%rename(HiraOptions) ACC_OPTIONS_HIRA;
%rename(PveraOptions) ACC_OPTIONS_PVERA;
%rename(Default) ACC_PLACEMENT_DEFAULT;
%rename(No) ACC_PLACEMENT_NO;
%rename(Yes) ACC_PLACEMENT_YES;


/* PascalCase members; camelcase also drops the trailing underscore of e.g. numel_. */
%rename("%(camelcase)s", %$isfunction, %$ismember) "";
%rename(Library) accswig::Library;

%typemap(csclassmodifiers) SWIGTYPE "public partial class"
%pragma(csharp) moduleclassmodifiers="public partial class"
%csconst(1);
%csconst(0) ACC_FORWARD_DEFAULT;
%csconst(0) ACC_FORWARD_NO_GRAD;

/* Internal plumbing the idiomatic methods (bindings/csharp/src) are built on. */
%csmethodmodifiers accswig::Library::findBatchSizeWith "internal";
%csmethodmodifiers acc_tensor::fromFloats "internal";
%csmethodmodifiers acc_tensor::fromDoubles "internal";
%csmethodmodifiers acc_tensor::fromLongs "internal";
%csmethodmodifiers acc_tensor::fromInts "internal";
%csmethodmodifiers acc_tensor::fromBytes "internal";
%csmethodmodifiers acc_tensor::copyToFloats "internal";
%csmethodmodifiers acc_tensor::copyToDoubles "internal";
%csmethodmodifiers acc_tensor::copyToLongs "internal";
%csmethodmodifiers acc_tensor::copyToInts "internal";
%csmethodmodifiers acc_tensor::copyToBytes "internal";
%csmethodmodifiers acc_tensor::copyShape "internal";
%csmethodmodifiers acc_tensor::zeros_ "internal";
%csmethodmodifiers acc_tensor::rand_ "internal";
%csmethodmodifiers acc_tensor::randn_ "internal";
%csmethodmodifiers acc_tensor::fromFileMmap "internal";
%csmethodmodifiers acc_optimizer::addParamGroup "internal";
%csmethodmodifiers acc_dataset::fromSampleSource "internal";
%csmethodmodifiers acc_dataset::fromStreamSource "internal";
%csmethodmodifiers acc_dataloader::setCollator "internal";
%csmethodmodifiers acc_dataloader::fromBatchArrays "internal";
%csmethodmodifiers acc_string_list::copyBytes "internal";
%csmethodmodifiers acc_model::forward_ "internal";
%csmethodmodifiers acc_model::forwardAdapters_ "internal";
/* (Their counts must be the arrays' lengths: Model.cs's overloads, taking the arrays alone, are the API.) */
%csmethodmodifiers acc_model::mergeLoraAdapters "internal";
%csmethodmodifiers acc_model::addWeightedAdapter "internal";
%csmethodmodifiers accswig::HistogramView::copyLimits "internal";
%csmethodmodifiers accswig::HistogramView::copyCounts "internal";
%csmethodmodifiers accswig::Images::copyPng "internal";
%csmethodmodifiers acc_model::loadSafetensors "internal";
%csmethodmodifiers acc_accelerator::gatherObject "internal";
%csmethodmodifiers acc_accelerator::broadcastObject "internal";
%csmethodmodifiers acc_accelerator::splitBetweenProcesses "internal";
%csmethodmodifiers acc_accelerator::accumulateBegin "internal";
%csmethodmodifiers acc_accelerator::accumulateEnd "internal";
%csmethodmodifiers acc_accelerator::noSyncBegin "internal";
%csmethodmodifiers acc_accelerator::noSyncEnd "internal";
%csmethodmodifiers acc_accelerator::profileBegin "internal";
%csmethodmodifiers acc_accelerator::profileStep "internal";
%csmethodmodifiers acc_accelerator::profileEnd "internal";
%csmethodmodifiers acc_accelerator::localSgdBegin "internal";
%csmethodmodifiers acc_accelerator::localSgdStep "internal";
%csmethodmodifiers acc_accelerator::localSgdEnd "internal";
%csmethodmodifiers acc_accelerator::joinUnevenInputsBegin "internal";
%csmethodmodifiers acc_accelerator::joinUnevenInputsEnd "internal";
%csmethodmodifiers acc_accelerator::mainProcessFirstBegin "internal";
%csmethodmodifiers acc_accelerator::mainProcessFirstEnd "internal";
%csmethodmodifiers acc_accelerator::localMainProcessFirstBegin "internal";
%csmethodmodifiers acc_accelerator::localMainProcessFirstEnd "internal";
%rename(LoadSafetensorsReport) acc_model::loadSafetensors;
%csmethodmodifiers acc_accelerator::autocastBegin "internal";
%csmethodmodifiers acc_accelerator::autocastEnd "internal";
%csmethodmodifiers acc_accelerator::registerForCheckpointing "internal";
%csmethodmodifiers acc_accelerator::registerSaveStatePreHook "internal";
%csmethodmodifiers acc_accelerator::registerLoadStatePreHook "internal";
%csmethodmodifiers acc_accelerator::registerSaveStateModelsPreHook "internal";
%csmethodmodifiers acc_accelerator::registerLoadStateModelsPreHook "internal";
%csmethodmodifiers acc_accelerator::removeStatePreHook "internal";
%csmethodmodifiers acc_accelerator::onTraceReady "internal";
%csmethodmodifiers acc_accelerator::addTracker "internal";
%csmethodmodifiers acc_accelerator::logValues "internal";
%csmethodmodifiers acc_accelerator::logTexts "internal";
%csmethodmodifiers acc_accelerator::logGroup "internal";
%csmethodmodifiers acc_accelerator::logImages "internal";
%csmethodmodifiers acc_accelerator::backwardWith "internal";
%csmethodmodifiers acc_accelerator::initTrackersWith "internal";
%csmethodmodifiers acc_accelerator::logHistogramWith "internal";
%csmethodmodifiers acc_scheduler::fromLrLambda "internal";
%csmethodmodifiers acc_scheduler::fromLrMultiplicative "internal";
%csmethodmodifiers acc_scheduler::fromGroupLrLambda "internal";
%csmethodmodifiers acc_scheduler::fromGroupLrMultiplicative "internal";
%csmethodmodifiers acc_scheduler::fromCyclicScale "internal";
%csmethodmodifiers accswig::Bytes::append_ "internal";
%csmethodmodifiers accswig::Bytes::copyTo "internal";

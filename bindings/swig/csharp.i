/* csharp.i — C# specifics of accelerate.i: errors become Accelerate.*Exception in the native call
 * that failed (SWIG's pending-exception slot, filled through a registered delegate), arrays are C#
 * arrays, member names are PascalCase, and the proxies are partial classes that the hand-written
 * layer (bindings/csharp/src) completes. Proxies are IDisposable (SWIG's default) with SWIG's
 * finalizer as the backstop; a disposed proxy passes a null handle, which the library rejects. */

/* Sizes and indices are long, as in Java (C#'s int does not convert to SWIG's uint implicitly). */
%apply long long { size_t };

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
  } catch (const accswig::Error &e) {
    accswig_cs_raise((int)e.code, e.message.c_str());
    return $null;
  } catch (const std::exception &e) {
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
%apply const int64_t *data { const int64_t *shape }
%apply const int64_t *data { const int64_t *sizes }
%apply const int64_t *data { const int64_t *dims }

/* ---- names and classes --------------------------------------------------------------------------- */

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
%csmethodmodifiers acc_model::loadSafetensors "internal";
%csmethodmodifiers acc_accelerator::gatherObject "internal";
%csmethodmodifiers acc_accelerator::splitBetweenProcesses "internal";
%csmethodmodifiers acc_accelerator::accumulateBegin "internal";
%csmethodmodifiers acc_accelerator::accumulateEnd "internal";
%csmethodmodifiers acc_accelerator::noSyncBegin "internal";
%csmethodmodifiers acc_accelerator::noSyncEnd "internal";
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
%csmethodmodifiers acc_accelerator::addTracker "internal";
%csmethodmodifiers acc_accelerator::logValues "internal";
%csmethodmodifiers acc_scheduler::fromLrLambda "internal";
%csmethodmodifiers accswig::Bytes::append_ "internal";
%csmethodmodifiers accswig::Bytes::copyTo "internal";

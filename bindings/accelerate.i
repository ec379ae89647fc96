/* accelerate.i — the one SWIG interface of accelerate's bindings (Java, C#, Go).
 *
 * It wraps a whitelist of accelerate.h as one proxy class per handle type (%extend), so no raw
 * status/out-parameter function reaches a host language:
 *  - every method checks the status and reads the library's message inside the same native call
 *    (accswig::check), and the per-language %exception turns it into the language's error;
 *  - every handle a method returns is owned by the caller (%feature("new") below), freed by the
 *    proxy's close/Dispose/Close;
 *  - arrays are the language's arrays; name lists cross as one "\n"-joined string;
 *  - host callbacks are SWIG directors (bindings/swig/directors.hpp), freed through acc_free_fn.
 * Per-language typemaps live in swig/{java,csharp,go}.i. Go needs a hidden trailing error argument
 * on each method (ERR / ERR0, swig/err.hpp), which expands to nothing in the other languages. */
%module(directors="1") Native

%{
#include <memory>
#include <string>
#include <vector>
#include "accelerate.h"
#include "swig/glue.hpp"
using namespace accswig;
#include "swig/err.hpp"
#include "swig/callbacks.hpp"
%}

/* Linux LP64: int64_t is long (stdint.i would otherwise declare it long long). */
#define SWIGWORDSIZE64
%include <stdint.i>
#if defined(SWIGJAVA) || defined(SWIGCSHARP)
/* Those languages take C's long for 32 bits: int64_t gets long long's 64-bit mapping. */
%apply long long { int64_t };
#endif
%include <std_string.i>

%include "swig/err.hpp"

/* Every handle a wrapped method returns is the caller's (the C API's out-parameter rule). */
%feature("new", "1");

#if defined(SWIGJAVA)
%include "swig/java.i"
#elif defined(SWIGCSHARP)
%include "swig/csharp.i"
#elif defined(SWIGGO)
%include "swig/go.i"
#endif

/* ---- names ---------------------------------------------------------------------------------- */

/* SWIG names an %extend method's C function <struct>_<method>, which for e.g. Tensor.numel would be
 * acc_tensor_numel itself: such methods are written numel_ and lose the underscore here. */
#if defined(SWIGCSHARP)  /* PascalCase, which drops the underscore too */
%rename("%(camelcase)s", regextarget=1) "[a-z0-9]_$";
#else
%rename("%(regex:/^(.*)_$/\\1/)s", regextarget=1) "[a-z0-9]_$";
#endif

%rename(Tensor) acc_tensor;
%rename(TensorList) acc_tensor_list;
%rename(StringList) acc_string_list;
%rename(Options) acc_options;
%rename(Model) acc_model;
%rename(Optimizer) acc_optimizer;
%rename(Scheduler) acc_scheduler;
%rename(Dataset) acc_dataset;
%rename(DataLoader) acc_dataloader;
%rename(Accelerator) acc_accelerator;
%rename(Progress) acc_progress;

#if !defined(SWIGGO)  /* Go reads the enums as cgo constants instead (bindings/go/internal/capi) */
%rename(Status) acc_status;
%rename(DType) acc_dtype;
%rename(Reduction) acc_reduction;
%rename(HandleKind) acc_handle_kind;
%rename(OptionsKind) acc_options_kind;
%rename(Placement) acc_placement;
#endif
#if defined(SWIGJAVA)  /* Java's constants: Reduction.MEAN, HandleKind.HANDLE_TENSOR; C#'s are PascalCase (csharp.i) */
%rename("%(strip:[ACC_ERR_])s", %$isenumitem, regextarget=1) "^ACC_ERR_";
%rename(OK) ACC_OK;
%rename("%(strip:[ACC_DTYPE_])s", %$isenumitem, regextarget=1) "^ACC_DTYPE_";
%rename("%(strip:[ACC_REDUCTION_])s", %$isenumitem, regextarget=1) "^ACC_REDUCTION_";
/* C enum items share one scope: handle kinds keep HANDLE_ apart from the options kinds. */
%rename("%(strip:[ACC_])s", %$isenumitem, regextarget=1) "^ACC_HANDLE_";
%rename("%(strip:[ACC_OPTIONS_])s", %$isenumitem, regextarget=1) "^ACC_OPTIONS_";
%rename("%(strip:[ACC_PLACEMENT_])s", %$isenumitem, regextarget=1) "^ACC_PLACEMENT_";
#endif

/* Deliberately not wrapped (the test bindings_header_coverage checks that the interface calls every
 * other function of accelerate.h, and none of these):
 *  - acc_prepare: the per-object prepare methods do the same, and a binding cannot swap the caller's
 *    handles in place
 *  - acc_tensor_from_host_borrow: zero-copy over host memory the GC may move or free; the bindings copy
 *  - acc_last_error_code: the error is read inside each wrapper call
 */
/* The whitelist: the header's functions are reached only through the classes below; its enums and
 * version macros are wrapped as they are, less the never-valid sentinels. */
%rename("$ignore", %$isfunction, regextarget=1) "^acc_";
%ignore ACC_STATUS_MAX_ENUM;
%ignore ACC_DTYPE_MAX_ENUM;
%ignore ACC_REDUCTION_MAX_ENUM;
%ignore ACC_HANDLE_MAX_ENUM;
%ignore ACC_OPTIONS_MAX_ENUM;
%ignore ACC_PLACEMENT_MAX_ENUM;
%ignore ACC_API;
%ignore ACC_NODISCARD;

%include "accelerate.h"

/* ---- callbacks (directors the host layers subclass) ------------------------------------------ */

%feature("director") accswig::SampleSource;
%feature("director") accswig::StreamSource;
%feature("director") accswig::Collator;
%feature("director") accswig::StateHandler;
%feature("director") accswig::CheckpointHook;
%feature("director") accswig::Tracker;
%feature("director") accswig::LrLambda;
%feature("director") accswig::BatchSizeRun;
%nodefaultctor accswig::Callback;
%include "swig/directors.hpp"

/* ---- library-wide functions ------------------------------------------------------------------- */

#if !defined(SWIGCSHARP)  /* C#: Library (a class may not share the namespace's name Accelerate) */
%rename(Accelerate) accswig::Library;
#endif
%nodefaultctor accswig::Library;
%nodefaultctor accswig::Loss;
%nodefaultctor accswig::LoadReport;
%ignore accswig::LoadReport::missing_names;
%ignore accswig::LoadReport::unexpected_names;

%inline %{
namespace accswig {
struct Library {
  static std::string version() {
    int major = 0, minor = 0, patch = 0;
    acc_version(&major, &minor, &patch);
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
  static int abiVersion() { return acc_abi_version(); }
  static void checkAbi(int expected ERR) { check(acc_check_abi(expected)); }
  /* Each language's one load-time check: its host code (built for hostAbi), this wrapper (compiled
   * against ACC_ABI_VERSION) and the loaded library must agree, or VERSION_MISMATCH names all three;
   * then the library's own check. */
  static void checkBinding(const char *language, int hostAbi ERR) {
    const int library = acc_abi_version();
    if (hostAbi != library || ACC_ABI_VERSION != library)
      fail(ACC_ERR_VERSION_MISMATCH, std::string("the ") + language + " binding was built for ABI version " +
                                         std::to_string(hostAbi) + " (wrapper library: " +
                                         std::to_string(ACC_ABI_VERSION) + ") but the loaded libaccelerate has ABI version " +
                                         std::to_string(library) + "; use the binding built with this library");
    check(acc_check_abi(hostAbi));
  }
  static std::string buildInfo() { return acc_build_info(); }
  static std::string statusName(acc_status status) { return acc_status_name(status); }
  static int64_t liveHandles(acc_handle_kind kind) { return acc_debug_live_handles(kind); }
  static void setSeed(int64_t seed ERR) { check(acc_set_seed((uint64_t)seed)); }
  /* torch.get_rng_state() / set_rng_state(): torch's global CPU generator as a 1-D uint8 tensor. */
  static acc_tensor *getRandomState(ERR0) {
    acc_tensor *out = nullptr;
    check(acc_random_get_state(&out));
    return out;
  }
  static void setRandomState(const acc_tensor *state ERR) { check(acc_random_set_state(state)); }
  static size_t dtypeSize(acc_dtype dtype) { return acc_dtype_size(dtype); }
  static std::string lastErrorBacktrace() { return acc_last_error_backtrace(); }
  /* For callback implementations: the message of the error they are about to return. */
  static void callbackSetError(const char *message) { acc_callback_set_error(message); }
  /* Accelerate's find_executable_batch_size over `run` (borrowed for the call); the layers wrap it. */
  static int64_t findBatchSizeWith(int64_t startingBatchSize, accswig::BatchSizeRun *run ERR) {
    if (!run) fail(ACC_ERR_INVALID_ARGUMENT, "the run is null");
    int64_t out = 0;
    check(acc_find_executable_batch_size(startingBatchSize, &batch_size_trampoline, run, &out));
    return out;
  }
};

/* Names Model.loadSafetensors found missing from the file and unexpected in it. */
struct LoadReport {
  std::vector<std::string> missing_names, unexpected_names;
  size_t missingCount() const { return missing_names.size(); }
  std::string missing(size_t i) const { return missing_names.at(i); }
  size_t unexpectedCount() const { return unexpected_names.size(); }
  std::string unexpected(size_t i) const { return unexpected_names.at(i); }
};
}
%}

/* Losses: PyTorch's definitions; the result carries autograd history. */
%inline %{
namespace accswig {
struct Loss {
  static acc_tensor *crossEntropy(const acc_tensor *logits, const acc_tensor *target, acc_reduction reduction,
                                  double labelSmoothing ERR) {
    acc_tensor *out = nullptr;
    check(acc_loss_cross_entropy(logits, target, reduction, labelSmoothing, &out));
    return out;
  }
  static acc_tensor *nll(const acc_tensor *logProbs, const acc_tensor *target, acc_reduction reduction ERR) {
    acc_tensor *out = nullptr;
    check(acc_loss_nll(logProbs, target, reduction, &out));
    return out;
  }
  static acc_tensor *mse(const acc_tensor *input, const acc_tensor *target, acc_reduction reduction ERR) {
    acc_tensor *out = nullptr;
    check(acc_loss_mse(input, target, reduction, &out));
    return out;
  }
  static acc_tensor *bceWithLogits(const acc_tensor *logits, const acc_tensor *target, acc_reduction reduction ERR) {
    acc_tensor *out = nullptr;
    check(acc_loss_bce_with_logits(logits, target, reduction, &out));
    return out;
  }
};
}
%}

%include "swig/handles.i"

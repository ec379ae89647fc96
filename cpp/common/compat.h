// The one place that knows which libtorch it is built against: Debian's 1.13, or a 2.x (a PyTorch
// wheel's libtorch, Debian 13's 2.6, sid's 2.14). Differences are keyed on ACC_TORCH_VERSION
// (major * 100 + minor: 113, 206, 211, 300...); where a 2.x release changed a signature without a
// documented version (the Reducer's constructor changed three times), the form is detected at
// compile time and the libtorch in hand decides.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#define ACC_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace acc::compat {

// libtorch 2.x's Reducer counts a static graph's first-iteration gradient hooks in backwards that
// do not average (no_sync) too, so micro-steps before the first averaging step make it stop
// averaging (1.13 checks expect_autograd_hooks_ first).
constexpr bool kStaticGraphCountsLocalBackwards = ACC_TORCH_VERSION >= 200;

}  // namespace acc::compat

namespace c10d {
class ProcessGroup;
class Reducer;
class Store;
}  // namespace c10d

namespace acc::compat {

// ---- autocast: one call per device type since 2.4; separate CPU and GPU calls before ----

inline bool autocast_enabled(c10::DeviceType device) {
#if ACC_TORCH_VERSION >= 204
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if ACC_TORCH_VERSION >= 204
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_enabled(enabled);
  else
    at::autocast::set_cpu_enabled(enabled);
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
#if ACC_TORCH_VERSION >= 204
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
#if ACC_TORCH_VERSION >= 204
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(dtype);
  else
    at::autocast::set_autocast_cpu_dtype(dtype);
#endif
}

// ---- torch.norm(t, dim=d, keepdim=True) as PyTorch's Python computes it: frobenius_norm before 2.0,
// linalg.vector_norm(t, 2) from 2.0 (PowerSGD's Gram-Schmidt) ----
at::Tensor python_dim_norm(const at::Tensor& t, int64_t dim);

// ---- torch.optim's Python rules (optim/python_rules.h): from 2.0 they update running averages with
// lerp_, and step CUDA parameters with foreach ops by default (the macro for code that names ops
// 1.13 lacks) ----

#define ACC_PYTHON_OPTIMIZERS_2 (ACC_TORCH_VERSION >= 200)
constexpr bool kPythonOptimizers2 = ACC_PYTHON_OPTIMIZERS_2;

// fused=True (one ATen kernel steps every parameter of a device and dtype: _fused_adam_, _fused_adamw_,
// _fused_sgd_, _fused_adagrad_) on the CPU as on CUDA from 2.4 (optim/fused_rules.h).
#define ACC_FUSED_OPTIMIZERS (ACC_TORCH_VERSION >= 204)
constexpr bool kFusedOptimizers = ACC_FUSED_OPTIMIZERS;

// torch.optim.swa_utils.AveragedModel from 2.1: averages grouped by device and dtype, with
// _foreach_lerp_ for EMA everywhere and for SWA on CUDA (before: its avg_fn tensor by tensor).
#define ACC_FOREACH_AVERAGING (ACC_TORCH_VERSION >= 201)
// (Its buffers follow the model's at each update without use_buffers from 2.0, pytorch#84053; ours
// do on every version.)
constexpr bool kForeachAveraging = ACC_FOREACH_AVERAGING;

// ---- torch::optim: per-parameter state is keyed by the parameter's TensorImpl, its address as text
// in 1.13 and the address itself in 2.x ----

using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <typename Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // what 1.13's c10::guts::to_string writes
    text << param.unsafeGetTensorImpl();
    return text.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

// ---- TorchScript: a libtorch built with LLVM (Debian's 2.x) fuses CPU kernels in the JIT, which
// PyTorch's own builds do not: compiling each fused graph takes seconds and changes the numbers.
// Turns that off for the process, so TorchScript models run as under PyTorch's builds. ----
void disable_cpu_fusion();

// ---- c10d: since 2.0 Gloo and NCCL are Backends that a ProcessGroup dispatches to by device ----

// The TCPStore of a rendezvous (rank 0 serves it). 2.4+ serve it with libuv by default; a libtorch
// built without libuv (Debian's) refuses that, and then the classic server is used.
c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                               size_t workers, std::chrono::milliseconds timeout);

// A Gloo process group. It takes CPU tensors, and on a CUDA libtorch CUDA tensors too (several
// processes can then share one GPU, which NCCL refuses). `loopback` binds to 127.0.0.1, else to
// the address the machine's hostname resolves to.
c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size, std::chrono::milliseconds timeout, bool loopback);

// An NCCL process group (CUDA tensors only); fails with Unsupported in a build without CUDA.
c10::intrusive_ptr<c10d::ProcessGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size, std::chrono::milliseconds timeout);

// What DDP's Reducer needs from us, in every libtorch's constructor order.
struct ReducerSettings {
  std::vector<at::Tensor> params;
  std::vector<std::vector<size_t>> buckets;  // indices into params, in the order they are reduced
  std::vector<size_t> bucket_limits;         // each bucket's size cap in bytes (1.13..2.6 take them)
  int64_t bucket_cap_bytes = 0;
  int64_t first_bucket_cap_bytes = 0;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;  // gradients are views into the buckets (no copy of them)
  std::unordered_map<size_t, std::string> names;  // parameter names, for the Reducer's error messages
};

std::unique_ptr<c10d::Reducer> make_reducer(ReducerSettings settings, c10::intrusive_ptr<c10d::ProcessGroup> group);

// ---- torch's profiler events: nanoseconds since 2.x (startNs, durationNs), microseconds in 1.13 ----

namespace detail {
template <class Event>
auto event_start_ns(const Event& e, int) -> decltype(static_cast<uint64_t>(e.startNs())) {
  return e.startNs();
}
template <class Event>
uint64_t event_start_ns(const Event& e, long) {
  return static_cast<uint64_t>(e.startUs()) * 1000;
}
template <class Event>
auto event_duration_ns(const Event& e, int) -> decltype(static_cast<uint64_t>(e.durationNs())) {
  return e.durationNs();
}
template <class Event>
uint64_t event_duration_ns(const Event& e, long) {
  return static_cast<uint64_t>(e.durationUs()) * 1000;
}
}  // namespace detail

template <class Event>
uint64_t profiler_event_start_ns(const Event& e) {
  return detail::event_start_ns(e, 0);
}
template <class Event>
uint64_t profiler_event_duration_ns(const Event& e) {
  return detail::event_duration_ns(e, 0);
}

}  // namespace acc::compat

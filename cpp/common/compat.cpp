#include "common/compat.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef ACC_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#if __has_include(<torch/csrc/jit/codegen/fuser/interface.h>)
#include <torch/csrc/jit/codegen/fuser/interface.h>
#else
namespace torch::jit {
TORCH_API void overrideCanFuseOnCPU(bool value);  // libtorch_cpu exports it; Debian's 1.13 ships no header
}  // namespace torch::jit
#endif

#include <cstdlib>
#include <mutex>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "common/gloo_bfloat16.h"
#include "common/text.h"

namespace acc::compat {
namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

#if ACC_TORCH_VERSION >= 200
// 2.x: a ProcessGroup holds one Backend per device type and dispatches each collective to the
// backend of its tensors' device, as torch.distributed.init_process_group sets it up. (2.0-2.5 took
// a ProcessGroup::Options too; that form is not supported.)
template <typename PG = c10d::ProcessGroup>
Group wrap_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   const c10::intrusive_ptr<c10d::Backend>& backend, typename PG::BackendType type,
                   std::initializer_list<c10::DeviceType> devices) {
  static_assert(std::is_constructible_v<PG, c10::intrusive_ptr<c10d::Store>, int, int>,
                "this libtorch's ProcessGroup(store, rank, size) is missing: libtorch 1.13 and 2.6+ are supported");
  auto group = c10::make_intrusive<PG>(store, rank, size);
  for (auto device : devices) group->setBackend(device, type, backend);
  group->setDefaultBackend(type);
  return group;
}
#endif

// TCPStoreOptions::useLibUV exists since 2.3: cleared where it exists, reporting whether it was set.
template <typename Options>
auto clear_libuv(Options& o, int) -> decltype(o.useLibUV = false, bool()) {
  return std::exchange(o.useLibUV, false);
}
template <typename Options>
bool clear_libuv(Options&, long) {
  return false;
}

using Params = std::vector<at::Tensor>;
using Buckets = std::vector<std::vector<size_t>>;
using Limits = std::vector<size_t>;
using Sparse = std::vector<bool>;
using Names = std::unordered_map<size_t, std::string>;
using Caps = std::vector<int64_t>;

// The Reducer's constructor, newest form first. Every later argument keeps DDP's default
// (skip_all_reduce_unused_params, use_python_reducer: false; bucket_bytes_cap_list: empty, which
// means [first_bucket_cap, bucket_cap] as the older forms had it).
template <typename R>
std::unique_ptr<R> construct_reducer(ReducerSettings& s, const Group& g) {
  Sparse sparse(s.params.size(), false);
  const bool as_view = s.gradient_as_bucket_view;
  if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, int64_t, bool, bool, Names, int64_t, bool,
                                        bool, Caps>) {
    return std::make_unique<R>(std::move(s.params), std::move(s.buckets), g, sparse, s.bucket_cap_bytes,
                               s.find_unused_parameters, as_view, std::move(s.names), s.first_bucket_cap_bytes, false,
                               false, Caps{});
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, int64_t, bool, bool, Names, int64_t,
                                               bool, bool>) {
    return std::make_unique<R>(std::move(s.params), std::move(s.buckets), g, sparse, s.bucket_cap_bytes,
                               s.find_unused_parameters, as_view, std::move(s.names), s.first_bucket_cap_bytes, false,
                               false);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Limits, Group, Sparse, int64_t, bool, bool, Names,
                                               int64_t, bool, bool>) {
    return std::make_unique<R>(std::move(s.params), std::move(s.buckets), s.bucket_limits, g, sparse,
                               s.bucket_cap_bytes, s.find_unused_parameters, as_view, std::move(s.names),
                               s.first_bucket_cap_bytes, false, false);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Limits, Group, Sparse, int64_t, bool, bool, Names,
                                               int64_t, bool>) {
    return std::make_unique<R>(std::move(s.params), std::move(s.buckets), s.bucket_limits, g, sparse,
                               s.bucket_cap_bytes, s.find_unused_parameters, as_view, std::move(s.names),
                               s.first_bucket_cap_bytes, false);
  } else {
    static_assert(std::is_constructible_v<R, Params, Buckets, Limits, Group, Sparse, int64_t, bool, bool, Names,
                                          int64_t>,
                  "this libtorch's c10d::Reducer constructor is not one that compat.cpp knows");
    return std::make_unique<R>(std::move(s.params), std::move(s.buckets), s.bucket_limits, g, sparse,
                               s.bucket_cap_bytes, s.find_unused_parameters, as_view, std::move(s.names),
                               s.first_bucket_cap_bytes);
  }
}

}  // namespace

at::Tensor python_dim_norm(const at::Tensor& t, int64_t dim) {
#if ACC_TORCH_VERSION >= 200
  return at::linalg_vector_norm(t, 2, at::IntArrayRef{dim}, /*keepdim=*/true);
#else
  return at::frobenius_norm(t, at::IntArrayRef{dim}, /*keepdim=*/true);
#endif
}

void disable_cpu_fusion() {
  static std::once_flag once;
  std::call_once(once, [] { torch::jit::overrideCanFuseOnCPU(false); });
}

c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                               size_t workers, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = is_server;
  options.numWorkers = workers;
  // The process group's connection waits for every peer (within the timeout) anyway; the store
  // waiting for them first would make a missing peer cost twice the timeout.
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    if (std::string(e.what()).find("libuv") == std::string::npos || !clear_libuv(options, 0)) throw;
  }
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

namespace {

// The network interfaces that GLOO_SOCKET_IFNAME names ("eth0" or "eth0,eth1"), as PyTorch's own
// binding reads it (libtorch's C++ constructor does not): where a host name resolves to the wrong
// network (Debian's 127.0.1.1, a management network), the interface to use. Empty when unset.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_socket_interfaces() {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  const char* names = std::getenv("GLOO_SOCKET_IFNAME");
  if (!names || !*names) return devices;
  for (const std::string& name : split_trimmed(names, ',')) {
    require(!name.empty(), "GLOO_SOCKET_IFNAME='", names, "' has an empty interface name");
    try {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    } catch (const std::exception& e) {
      const std::string what = e.what();  // gloo's: where it was raised, then the reason
      fail(Status::InvalidArgument, "GLOO_SOCKET_IFNAME names the network interface '", name,
           "', which this machine cannot use: ", what.substr(0, what.find('\n')));
    }
  }
  return devices;
}

}  // namespace

Group make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, bool loopback) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  options->devices = gloo_socket_interfaces();
  if (options->devices.empty())
    options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
  options->threads = static_cast<int>(options->devices.size()) * 2;  // as torch's Python binding sets it
#if ACC_TORCH_VERSION < 202
  auto gloo = c10::make_intrusive<GlooWithBfloat16>(store, rank, size, options);
#else
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#endif
#if ACC_TORCH_VERSION >= 200
  return wrap_backend(store, rank, size, gloo, c10d::ProcessGroup::GLOO, {c10::kCPU, c10::kCUDA});
#else
  return gloo;
#endif
}

Group make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout) {
#ifdef ACC_WITH_CUDA
  // Without blocking wait, ProcessGroupNCCL's wait() only orders streams and a stalled peer ends the
  // process from its watchdog (SIGABRT); with it, wait() throws at the timeout, which the library
  // reports as ACC_ERR_TIMEOUT naming the collective. Read when the group is made; a user's setting
  // (0: overlap kept, aborts instead of errors) stays.
#if ACC_TORCH_VERSION >= 200
  const char* blocking_wait = "TORCH_NCCL_BLOCKING_WAIT";
#else
  const char* blocking_wait = "NCCL_BLOCKING_WAIT";
#endif
  if (!std::getenv("TORCH_NCCL_BLOCKING_WAIT") && !std::getenv("NCCL_BLOCKING_WAIT")) setenv(blocking_wait, "1", 0);
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#if ACC_TORCH_VERSION >= 200
  return wrap_backend(store, rank, size, nccl, c10d::ProcessGroup::NCCL, {c10::kCUDA});
#else
  return nccl;
#endif
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  fail(Status::Unsupported, "backend \"nccl\" is not built in: configure with a CUDA libtorch (ACC_WITH_CUDA)");
#endif
}

std::unique_ptr<c10d::Reducer> make_reducer(ReducerSettings settings, c10::intrusive_ptr<c10d::ProcessGroup> group) {
  return construct_reducer<c10d::Reducer>(settings, group);
}

}  // namespace acc::compat

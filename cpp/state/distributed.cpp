#include "state/distributed.h"

#include <mutex>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef ACC_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>

#include "common/error.h"
#include "common/options.h"

namespace acc {
namespace {

bool contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 std::chrono::milliseconds timeout, const std::string& address) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  // Loopback jobs bind to loopback; others to the address the machine's hostname resolves to.
  if (address == "127.0.0.1" || address == "localhost")
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

[[noreturn]] void rethrow_collective_error(const std::string& name) {
  std::string message;
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  const auto newline = message.find("\nException raised from");
  if (newline != std::string::npos) message.resize(newline);
  if (contains(message, "imed out") || contains(message, "timeout") || contains(message, "Timeout"))
    fail(Status::Timeout, "collective '", name, "' timed out (a process stopped or is stalled): ", message);
  if (contains(message, "closed") || contains(message, "reset by peer") || contains(message, "Broken pipe") ||
      contains(message, "Connection refused"))
    fail(Status::Aborted, "collective '", name, "' failed because a peer process went away: ", message);
  fail(Status::Distributed, "collective '", name, "' failed: ", message);
}

void wait_collective(const c10::intrusive_ptr<c10d::Work>& work, const std::string& name) {
  try {
    work->wait();
  } catch (...) {
    rethrow_collective_error(name);
  }
}

Distributed::Distributed(const ProcessEnv& env, const c10::Device& device, std::chrono::milliseconds timeout)
    : rank_(env.rank),
      world_(env.world_size),
      device_(device),
      debug_(false) {
  if (const char* flag = std::getenv("ACCELERATE_DEBUG_MODE")) debug_ = parse_bool(flag).value_or(false);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = static_cast<size_t>(env.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  // Both steps wait for every process: a failure here is a failed rendezvous.
  auto rendezvous_failed = [&](const char* step) {
    try {
      rethrow_collective_error(step);
    } catch (const Error& e) {
      fail(e.status() == Status::Aborted ? Status::Distributed : e.status(), "rendezvous of ", env.world_size,
           " processes at ", env.master_addr, ":", env.master_port, " failed (is the port in use, or did a process "
           "not start?): ", e.what());
    }
  };
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (...) {
    rendezvous_failed("store");
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>("accelerate/", store_);
  try {
    if (device.is_cuda()) {
#ifdef ACC_WITH_CUDA
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(rank_), static_cast<int>(world_),
                                                           options);
#else
      fail(Status::Unsupported, "NCCL is not built in: configure with a CUDA libtorch");
#endif
    } else {
      group_ = make_gloo(store, static_cast<int>(rank_), static_cast<int>(world_), timeout, env.master_addr);
    }
  } catch (const Error&) {
    throw;
  } catch (...) {
    rendezvous_failed("process group creation");
  }
}

std::shared_ptr<Distributed> join_process_group(const ProcessEnv& env, const c10::Device& device,
                                                std::chrono::milliseconds timeout) {
  static std::mutex mutex;
  static std::weak_ptr<Distributed> current;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto group = current.lock()) {
    require(group->device().type() == device.type(), "this process already joined its job on ", group->device(),
            "; an accelerator on ", device, " cannot join it too (use the same cpu setting)");
    return group;
  }
  auto group = std::make_shared<Distributed>(env, device, timeout);
  current = group;
  return group;
}

}  // namespace acc

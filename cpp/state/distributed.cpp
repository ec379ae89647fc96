#include "state/distributed.h"

#include <signal.h>

#include <mutex>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <atomic>
#include <cstdlib>
#include <optional>

#include "common/compat.h"
#include "common/error.h"
#include "common/options.h"
#include "common/peer_failure.h"
#include "state/port_probe.h"
#include "state/roll_call.h"
#include "state/store_deadline.h"

namespace acc {
namespace {

bool contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

// The message of the exception being handled, without libtorch's backtrace.
std::string current_message() {
  std::string message;
  try {
    throw;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  const auto newline = message.find("\nException raised from");
  if (newline != std::string::npos) message.resize(newline);
  return message;
}

// What a transport's message says happened to the peers, if it says so.
std::optional<Status> peer_failure(const std::string& message) {
  if (contains(message, "imed out") || contains(message, "timeout") || contains(message, "Timeout"))
    return Status::Timeout;
  if (contains(message, "closed") || contains(message, "reset by peer") || contains(message, "Broken pipe") ||
      contains(message, "Connection refused"))
    return Status::Aborted;
  return std::nullopt;
}

[[noreturn]] void fail_for_peer(Status status, const std::string& name, const std::string& message) {
  if (status == Status::Timeout) fail(Status::Timeout, "collective '", name, kCollectiveTimedOut, message);
  fail(Status::Aborted, "collective '", name, kCollectivePeerGone, message);
}

}  // namespace

namespace {

// Inside a catch block: an acc::Error goes on as it is, and a transport's report of a stalled or
// vanished peer becomes Timeout/Aborted naming `name`; anything else returns.
void throw_if_peer_failure(const std::string& name) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (...) {
  }
  const std::string message = current_message();
  if (const auto status = peer_failure(message)) fail_for_peer(*status, name, message);
}

}  // namespace

[[noreturn]] void rethrow_collective_error(const std::string& name) {
  throw_if_peer_failure(name);
  fail(Status::Distributed, "collective '", name, "' failed: ", current_message());
}

[[noreturn]] void rethrow_peer_failure_or_original(const std::string& name) {
  throw_if_peer_failure(name);
  throw;
}

void wait_collective(const c10::intrusive_ptr<c10d::Work>& work, const std::string& name) {
  try {
    work->wait();
  } catch (...) {
    rethrow_collective_error(name);
  }
}

// Gloo writes to its peers' sockets without MSG_NOSIGNAL: once a peer is gone, SIGPIPE's default
// action would kill this process silently (exit 141) where the write's error becomes an aborted
// collective naming the operation. Python ignores SIGPIPE for the same reason; a program that set
// its own handler keeps it.
static void ignore_sigpipe() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

const char* backend_name(Backend backend) { return backend == Backend::Nccl ? "nccl" : "gloo"; }

Backend parse_backend(const std::string& name) {
  if (name == "gloo") return Backend::Gloo;
  if (name == "nccl") return Backend::Nccl;
  fail(Status::InvalidArgument, "unknown process-group backend '", name, "' (gloo, nccl)");
}

Distributed::Distributed(const ProcessEnv& env, const c10::Device& device, Backend backend,
                         std::chrono::milliseconds timeout)
    : rank_(env.rank),
      world_(env.world_size),
      backend_(backend),
      process_device_(device),
      // Gloo's collectives are staged on the CPU (it takes every op there); NCCL's on the GPU.
      device_(backend == Backend::Nccl ? device : c10::Device(c10::kCPU)),
      local_rank_(env.local_rank),
      local_size_(env.local_world_size),
      timeout_(timeout),
      // Loopback jobs bind to loopback; others to the address the machine's hostname resolves to.
      loopback_(env.master_addr == "127.0.0.1" || env.master_addr == "localhost") {
  if (backend == Backend::Nccl && !device.is_cuda())
    fail(Status::Unsupported, "backend \"nccl\" needs a CUDA device; this process runs on ", device,
         " (use \"gloo\")");
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
  ignore_sigpipe();
  // Process 0 hosts the store, unless the launcher does (then it is up before any process starts).
  const bool hosts_store = env.rank == 0 && !env.agent_store_prefix;
  std::string why;
  if (!hosts_store && !wait_until_accepting(env.master_addr, static_cast<uint16_t>(env.master_port),
                                            std::chrono::steady_clock::now() + timeout, why))
    fail(Status::Timeout, "rendezvous of ", env.world_size, " processes at ", env.master_addr, ":", env.master_port,
         " timed out after ", std::chrono::duration<double>(timeout).count(), " s: ", why, " ",
         env.agent_store_prefix ? "(is the launcher that hosts the store running?)"
                                : "(is MASTER_ADDR process 0's machine, and did process 0 start?)");
  if (!hosts_store &&
      speaks_first(env.master_addr, static_cast<uint16_t>(env.master_port), std::chrono::milliseconds(100)))
    fail(Status::Distributed, "rendezvous at ", env.master_addr, ":", env.master_port, ": what answers there is no ",
         "rendezvous store (it sent data before being asked, as an SSH server's greeting does): is MASTER_ADDR:",
         "MASTER_PORT (--main_process_ip, --main_process_port) another program's address?");
  try {
    const auto port = static_cast<uint16_t>(env.master_port);
    store_ = connect_with_deadline(
        [&] {
          return compat::make_tcp_store(env.master_addr, port, hosts_store, static_cast<size_t>(env.world_size),
                                        timeout);
        },
        port, timeout, env.master_addr + ":" + std::to_string(env.master_port));
    // The launcher's store outlives this group: a group that every process joins again after all
    // left the last one (accelerators freed, then created) keys its rendezvous apart from it.
    static std::atomic<int64_t> joins{0};
    if (env.agent_store_prefix) {
      const std::string prefix = *env.agent_store_prefix + "/join_" + std::to_string(joins++);
      store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
    }
  } catch (...) {
    rendezvous_failed("store");
  }
  try {
    roll_call(*store_, rank_, world_, timeout, env.master_addr + ":" + std::to_string(env.master_port));
  } catch (const Error&) {
    throw;
  } catch (...) {
    rendezvous_failed("roll call");
  }
  try {
    group_ = make_group("", static_cast<int>(rank_), static_cast<int>(world_));
    announcement_group_ = make_group("announcements/", static_cast<int>(rank_), static_cast<int>(world_));
  } catch (const Error&) {
    throw;
  } catch (...) {
    rendezvous_failed("process group creation");
  }
}

c10::intrusive_ptr<c10d::ProcessGroup> Distributed::make_group(const std::string& name, int rank, int size) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("accelerate/" + name, store_);
  if (backend_ == Backend::Nccl) return compat::make_nccl_group(store, rank, size, timeout_);
  return compat::make_gloo_group(store, rank, size, timeout_, loopback_);
}

const Distributed::ShardGroups& Distributed::machine_groups() {
  require(local_size_ >= 1 && world_ % local_size_ == 0 && local_rank_ >= 0 && local_rank_ < local_size_,
          "hybrid sharding needs the same number of processes on every machine: ", world_, " processes with ",
          local_size_, " on this machine");
  require((rank_ / local_size_) * local_size_ + local_rank_ == rank_, "hybrid sharding needs processes ranked ",
          "machine by machine (rank = machine * ", local_size_, " + local rank); process ", rank_, " has local rank ",
          local_rank_);
  return shard_groups(local_size_);
}

const Distributed::ShardGroups& Distributed::shard_groups(int64_t size) {
  if (auto found = shard_groups_.find(size); found != shard_groups_.end()) return *found->second;
  require(size >= 1 && world_ % size == 0, "groups of ", size, " processes do not divide the job's ", world_);
  auto groups = std::make_unique<ShardGroups>();
  groups->size = size;
  groups->rank = rank_ % size;
  groups->count = world_ / size;
  groups->index = rank_ / size;
  const std::string prefix = "groups" + std::to_string(size) + "/";
  try {
    // Every process makes its own group first, then its peers': no two wait on each other.
    groups->shard = make_group(prefix + "shard" + std::to_string(groups->index) + "/", static_cast<int>(groups->rank),
                               static_cast<int>(size));
    groups->peers = make_group(prefix + "peers" + std::to_string(groups->rank) + "/", static_cast<int>(groups->index),
                               static_cast<int>(groups->count));
  } catch (...) {
    rethrow_collective_error("hybrid sharding (process groups of " + std::to_string(size) + ")");
  }
  return *shard_groups_.emplace(size, std::move(groups)).first->second;
}

std::shared_ptr<Distributed> join_process_group(const ProcessEnv& env, const c10::Device& device, Backend backend,
                                                std::chrono::milliseconds timeout) {
  static std::mutex mutex;
  static std::weak_ptr<Distributed> current;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto group = current.lock()) {
    require(group->process_device().type() == device.type(), "this process already joined its job on ",
            group->process_device(),
            "; an accelerator on ", device, " cannot join it too (use the same cpu setting)");
    require(group->backend() == backend, "this process already joined its job over ", backend_name(group->backend()),
            "; an accelerator cannot join it over ", backend_name(backend), " too (use the same backend setting)");
    return group;
  }
  auto group = std::make_shared<Distributed>(env, device, backend, timeout);
  current = group;
  return group;
}

}  // namespace acc

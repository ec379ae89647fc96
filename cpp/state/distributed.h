// The process group of a multi-process job: TCPStore rendezvous at MASTER_ADDR:MASTER_PORT, then
// c10d's Gloo or NCCL backend (Accelerate's InitProcessGroupKwargs(backend=...): NCCL by default on
// CUDA, Gloo on CPU), with a timeout that every collective honours. A failed or stalled peer becomes
// Timeout/Aborted naming the collective, never a hang.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "state/process_env.h"

namespace acc {

// Gloo takes CPU tensors (and CUDA tensors on a CUDA libtorch: processes can share a GPU); NCCL
// takes CUDA tensors, one process per GPU.
enum class Backend { Gloo, Nccl };
const char* backend_name(Backend backend);
Backend parse_backend(const std::string& name);  // "gloo" or "nccl"

class Distributed {
 public:
  // `device` is where this process trains; NCCL needs it to be a GPU.
  Distributed(const ProcessEnv& env, const c10::Device& device, Backend backend, std::chrono::milliseconds timeout);

  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }
  // The group that carries only the announcements of collectives (ops/collectives.h). Apart from
  // group(), an announcement is never paired with a message of a training step's own collectives (a
  // DDP allreduce, a sharding gather) on another process, which Gloo would abort on from its own
  // thread, or take as data: the two sides wait for each other instead, and time out naming their calls.
  const c10::intrusive_ptr<c10d::ProcessGroup>& announcement_group() const { return announcement_group_; }
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_; }
  Backend backend() const { return backend_; }
  // Where this process trains.
  const c10::Device& process_device() const { return process_device_; }
  // Where our collectives stage their tensors: the CPU for Gloo, the rank's GPU for NCCL. (DDP's
  // buckets stay on the parameters' device: Gloo reduces CUDA buckets itself.)
  const c10::Device& device() const { return device_; }
  // ACCELERATE_DEBUG_MODE: shapes are compared across ranks before each collective.

  // Hybrid sharding's process groups: the `size` consecutive ranks this process shards with (its
  // group, rank / size), and the processes with this rank in their group in every group (its peers,
  // which hold the same slice). Made on first use, a collective step: every process asks at the same
  // point, with the same size. `size` divides the world.
  struct ShardGroups {
    c10::intrusive_ptr<c10d::ProcessGroup> shard, peers;
    int64_t index = 0, count = 1, rank = 0, size = 1;  // the group's index, the number of groups, ours
  };
  const ShardGroups& shard_groups(int64_t size);
  // The groups of FSDP's HYBRID_SHARD: this machine's processes. Needs the launcher's layout: the
  // same number of processes on every machine, ranked machine by machine.
  const ShardGroups& machine_groups();

 private:
  int64_t rank_, world_;
  Backend backend_;
  c10::Device process_device_;
  c10::Device device_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_, announcement_group_;
  int64_t local_rank_, local_size_;
  std::chrono::milliseconds timeout_;
  bool loopback_;
  std::map<int64_t, std::unique_ptr<ShardGroups>> shard_groups_;  // by size
  // A group of `ranks` (this process among them) on its own prefix of the store.
  c10::intrusive_ptr<c10d::ProcessGroup> make_group(const std::string& name, int rank, int size);
};

// The process group of this process, made on first use and shared by every Accelerator alive in the
// process (as Accelerate's AcceleratorState is): a process joins its job once. A later accelerator
// gets the same group; it must use the same kind of device and the same backend.
std::shared_ptr<Distributed> join_process_group(const ProcessEnv& env, const c10::Device& device, Backend backend,
                                                std::chrono::milliseconds timeout);

// Waits for a collective; its failure becomes acc::Error (Timeout, Aborted or Distributed) that
// names the collective.
void wait_collective(const c10::intrusive_ptr<c10d::Work>& work, const std::string& name);

// Translates the exception being handled (call inside a catch block) for collective `name`.
[[noreturn]] void rethrow_collective_error(const std::string& name);
// For work that runs collectives inside other code (DDP's gradient allreduce in backward): the
// exception being handled, if it reports a stalled or vanished peer, becomes the Timeout/Aborted
// error naming `name`; any other exception is rethrown as it is.
[[noreturn]] void rethrow_peer_failure_or_original(const std::string& name);

}  // namespace acc

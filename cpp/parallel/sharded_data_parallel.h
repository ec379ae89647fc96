// Sharded data parallelism on c10d (DeepSpeed's ZeRO stages, FSDP's sharding strategies): each of
// N processes owns a contiguous 1/N of every unit of flattened parameters (parallel/flat_layout.h)
// and keeps optimizer state only for what it owns (parallel/sharded_optimizer.h).
//   stage 1 (ZeRO-1): gradients are averaged as DDP does (its Reducer); each process steps its slice
//                     and the updated parameters are all-gathered.
//   stage 2 (ZeRO-2, SHARD_GRAD_OP): buckets (DDP's, in the model's order: 1 MiB, then
//                     bucket_cap_mb) are reduced during backward as their gradients become ready; a
//                     process keeps only its slice of each averaged bucket and drops the full
//                     gradients. They stay as they are (they are the shards' layout), where DDP
//                     rebuilds its buckets after the first step.
//   stage 3 (ZeRO-3, FULL_SHARD): parameters are sharded at rest too, frozen ones included (in
//                     units of their own, never reduced); a unit's parameters are gathered just
//                     before its forward and again before its backward, and freed after each (a
//                     frozen unit's backward is followed by parallel/frozen_release.h). Units: a
//                     spec model's layers; the submodules a TorchScript forward calls
//                     (model/script_units.h).
// Collectives: NCCL reduce-scatters and all-gathers flat tensors; Gloo has no reduce-scatter in
// libtorch 1.13, so a bucket is all-reduced (DDP's traffic) and each process keeps its slice.
// Hybrid sharding (FSDP's HYBRID_SHARD): the processes of each machine shard among themselves
// (layout, all-gathers, the norm) and the machines hold replicas; gradients are summed over every
// process (NCCL: reduce-scattered in the machine, then all-reduced among the peers holding the
// same slice).
// CPU offload (offload_optimizer, offload_params): the optimizer steps this process's slice in host
// memory (pinned on CUDA), so its state lives there. Stages 1 and 2 keep a host copy of the slice
// and copy the stepped values back before the all-gather; stage 3 keeps the shard itself in host
// memory and stages each unit to the device for its gather. The averaged gradients' slices are
// copied to the host once per step. On a CPU device the copies are real too (2/N of the
// parameters' bytes more): the path runs and is tested the same, but saves nothing there.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/model.h"
#include "parallel/buffer_sync.h"
#include "parallel/data_parallel.h"
#include "parallel/flat_layout.h"
#include "parallel/frozen_release.h"
#include "parallel/parallel_engine.h"
#include "state/distributed.h"

namespace acc {

// FSDP's auto_wrap_policy from the options: stage 3's units, and what activation_checkpointing
// recomputes.
UnitPolicy unit_policy(const ShardingOptions& options);

class ShardedDataParallel final : public ParallelEngine {
 public:
  // Broadcasts parameters and buffers from rank 0, flattens the trainable parameters (stage 3: and
  // the frozen ones) into units and (stage 3) frees everything but this process's shard.
  // `data_parallel`: stage 1's Reducer's options; its bucket_cap_mb makes stage 2's buckets.
  // `device`: where stage 3 puts the shards and gathers units (default: where the parameters are);
  // the caller moves the rest of the model there afterwards, so the whole model never goes there.
  ShardedDataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist, ShardingOptions options,
                      DataParallelOptions data_parallel, std::optional<at::Device> device = std::nullopt);
  ~ShardedDataParallel() override;
  // The model it trains (its checkpoint parts name the model's active adapter).
  const Model& model() const { return *model_; }

  bool every_forward() const override { return options_.stage == 3; }
  void before_forward(bool sync) override;
  void after_forward(NamedTensors& outputs, bool sync) override;
  void before_local_forward() override;
  void forward_done(bool recorded_synced_gradients) override;
  void sync_next_backward() override;
  void join_begin() override;
  void join_end() override;

  const ShardingOptions& options() const { return options_; }
  // Stage 1's Reducer (null at stages 2 and 3).
  DataParallel* data_parallel() const { return reducer_.get(); }
  const FlatLayout& layout() const { return *trainable_.layout; }
  const std::shared_ptr<Distributed>& distributed() const { return dist_; }
  // Whether this process writes its shard files (SHARDED_STATE_DICT): under hybrid sharding only
  // the first machine's (or group's) processes do, the others holding the same shards.
  bool writes_shards() const { return !peers_ || dist_->rank() < shard_world_; }
  // The trainable parameters, in the model's order, and their names.
  const std::vector<at::Tensor>& params() const { return trainable_.params; }
  const std::vector<std::string>& names() const { return trainable_.names; }
  const std::vector<std::vector<int64_t>>& shapes() const { return trainable_.shapes; }
  bool is_trainable(const std::string& name) const { return trainable_.index.count(name) > 0; }
  // 1-D tensors aliasing what this process owns of each parameter (layout().pieces() order): the
  // optimizer steps them in place.
  const std::vector<at::Tensor>& pieces() const { return pieces_; }
  // Points each piece's gradient at this process's share of the averaged gradients; false when no
  // backward has produced one since zero_grad.
  bool attach_piece_gradients();
  // The pieces' gradients, attached first (empty when there are none yet).
  std::vector<at::Tensor> piece_gradients();
  // Before the optimizer steps the pieces: under offload at stages 1 and 2, the host copy is
  // refreshed when the parameters were written since it was taken (a loaded checkpoint).
  void before_step();
  // After the optimizer stepped the pieces: stages 1 and 2 all-gather the updated parameters.
  void after_step();
  // Whether the pieces (and the optimizer's state) are in host memory.
  bool offloaded() const { return offload_; }
  void zero_grad();
  // torch's clip_grad_norm_ over the gradients of every process's pieces (stages 2 and 3: the full
  // gradients no longer exist); returns the total norm.
  double clip_grad_norm(double max_norm, double norm_type);
  // Runs `use` with the model's full parameters in place (a collective: every process calls it;
  // stage 3 gathers every unit first and frees them after, also where `use` fails). `call` names the
  // gathers in errors.
  void with_full_parameters(const char* call, const std::function<void()>& use);
  // The full parameters and buffers (a collective: every process calls it; stage 3 gathers unit by
  // unit into new tensors). `call` (save_model, get_state_dict, save_state) names its gathers.
  NamedTensors full_state_dict(const std::string& call);
  // Throws unless `state` holds every parameter and buffer with the model's shapes.
  void check_full_state_dict(const NamedTensors& state) const;
  // Copies full values in (each process keeps its slice under stage 3); checks first.
  void load_full_state_dict(const NamedTensors& state);
  // The replicated part of the state: buffers, and below stage 3 the frozen parameters.
  NamedTensors replicated_state_dict() const;
  // Stage 3's shard layout as JSON, what merges shard files without the job (merge_shards.h):
  // {"units": [{"slice": S, "params": [[name, shape, offset], ...]}, ...], "order": [state names]}.
  std::string shard_layout_json() const;
  // Stage 3's SHARDED_STATE_DICT: "unit.<u>" (this process's slice of unit u: the trainable units,
  // then the frozen ones, as in shard_layout_json) plus the replicated state.
  NamedTensors shard_state_dict() const;
  void check_shard_state(const NamedTensors& state) const;
  void load_shard_state(const NamedTensors& state);
  // Makes the allgather public for consolidating optimizer state: `full` (every process's slice of
  // a unit, padded) from `mine`.
  void allgather(const at::Tensor& full, const at::Tensor& mine, const std::string& name) {
    allgather_into(full, mine, name);
  }

 private:
  // Parameters flattened unit by unit (parallel/flat_layout.h): the trainable ones, and under stage 3
  // the frozen ones too, in units of their own (sharded as FSDP and DeepSpeed's ZeRO-3 shard them;
  // never reduced or stepped).
  struct FlatSet {
    explicit FlatSet(const char* what) : what(what) {}
    const char* what;  // how errors name its units: "unit", "frozen unit"
    std::vector<at::Tensor> params;
    std::vector<std::string> names;
    std::unordered_map<std::string, size_t> index;  // name -> index into params
    std::vector<std::vector<int64_t>> shapes;  // stage 3 empties the parameters at rest
    std::unique_ptr<FlatLayout> layout;
    // Each unit's full flat parameters (the parameters are views of it); under stage 3 its storage
    // is empty while the unit is released.
    std::vector<at::Tensor> full;
    std::vector<at::Tensor> shards;  // stage 3: each unit's slice of the parameters
    std::vector<bool> gathered;
    size_t units() const { return full.size(); }
    void add(const std::string& name, const at::Tensor& p) {
      index.emplace(name, params.size());
      params.push_back(p);
      names.push_back(name);
      shapes.push_back(p.sizes().vec());
    }
  };

  // stage 3: the unit's full parameters, from every process's slice (once); `phase` names the
  // collective in errors ("forward", "backward", ...)
  void gather(FlatSet& set, size_t unit, const char* phase);
  void release(FlatSet& set, size_t unit);  // stage 3: back to the shard only
  void gather_model_unit(size_t m, const char* phase);
  void release_model_unit(size_t m);
  void gather_all(const char* phase);
  void release_all();
  // Construction: the model's units (parameter names, Model::parameter_units) as indices into
  // `set` (stage 3), `set` flattened into its layout, and the hooks around the model's units.
  using ModelUnits = std::vector<std::vector<std::string>>;
  std::vector<std::vector<size_t>> flat_units_of_model(const FlatSet& set, const ModelUnits& model_units) const;
  void flatten(FlatSet& set, std::optional<at::Device> device, bool from_main_process);
  void install_unit_hooks(const ModelUnits& model_units);
  // The set that flattens the parameter `name` (null: replicated, a buffer or unknown).
  const FlatSet* flat_set_of(const std::string& name) const;
  // "unit.<u>" keys number the trainable units, then the frozen ones.
  at::Tensor& shard_of(size_t u);
  // Gradient reduction (sharded_reduction.cpp).
  void on_gradient_ready(size_t param);
  void launch_reduction(size_t unit);
  void finish_oldest_reduction();
  // The reductions launched so far that have completed (all of them: wait_all).
  void finish_reductions(bool wait_all);
  void finish_backward();
  at::Tensor my_slice(size_t unit, const at::Tensor& full) const;
  // Host memory for offloaded slices: pinned when the process computes on CUDA.
  at::TensorOptions host_options(at::ScalarType dtype) const;
  bool parameters_written_since_host_copy() const;
  void remember_parameter_versions();
  void allgather_into(const at::Tensor& full, const at::Tensor& mine, const std::string& name);

  std::shared_ptr<Model> model_;
  std::shared_ptr<Distributed> dist_;
  // The processes this one shards with: all of them, or (hybrid) those of its machine or group;
  // `peers_` (hybrid only) hold the same slice in every other machine or group.
  c10::intrusive_ptr<c10d::ProcessGroup> shard_group_, peers_;
  int64_t shard_world_ = 1, shard_rank_ = 0;
  ShardingOptions options_;
  DataParallelOptions data_parallel_;
  FlatSet trainable_{"unit"}, frozen_{"frozen unit"};
  std::unique_ptr<BufferSync> buffer_sync_;  // stages 2-3: the model's buffers, from rank 0 at forwards as DDP
  std::vector<at::Tensor> pieces_;
  std::unique_ptr<DataParallel> reducer_;  // stage 1
  // Stages 2 and 3: each unit's slice of the averaged gradients.
  std::vector<at::Tensor> shard_grads_;
  // Stage 3: the flat units (trainable, frozen) of each of the model's units, and when a frozen
  // one may be freed during backward.
  std::vector<std::vector<size_t>> trainable_of_unit_, frozen_of_unit_;
  std::shared_ptr<FrozenReleaseTracker> frozen_release_;
  // Offload: stages 1-2 step `host_master_` (this process's slice of each unit, in host memory);
  // every stage steps on `host_grads_`, the averaged gradients' slices copied to the host.
  bool offload_ = false;
  std::vector<at::Tensor> host_master_, host_grads_;
  std::vector<int64_t> param_versions_;   // the parameters' version counters when host_master_ was taken
  bool model_has_unit_hooks_ = false;
  // The backward in progress.
  bool sync_ = true;
  bool backward_started_ = false;
  bool grads_live_ = false;  // shard_grads_ hold a backward's result (zero_grad clears)
  bool add_to_grads_ = false;
  std::vector<size_t> ready_count_;
  std::vector<bool> launched_;
  int64_t next_launch_ = -1;
  // A unit's reduction under way: a bucket (or this process's reduce-scattered slice) and its
  // collective, or (stage 3 on Gloo) each gradient and its in-place all-reduce.
  struct Pending {
    size_t unit;
    std::vector<at::Tensor> tensors;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
  };
  std::vector<Pending> pending_;
  // shared_ptr in libtorch 1.13-2.x, intrusive_ptr in later ones.
  std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()))> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace acc

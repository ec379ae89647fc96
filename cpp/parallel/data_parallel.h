// Data-parallel gradients for a prepared model on several processes: c10d's Reducer (the engine of
// PyTorch's DistributedDataParallel) averages gradients in buckets, overlapped with backward.
#pragma once

#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "parallel/buffer_sync.h"
#include "parallel/parallel_engine.h"
#include "parallel/parallel_options.h"
#include "parallel/power_sgd.h"
#include "state/distributed.h"

namespace acc {

// Gradient buckets: each bucket's parameters (indices into the trainable parameters, in the order
// they lie in the bucket), in the order the Reducer reduces the buckets.
using BucketLayout = std::vector<std::vector<size_t>>;

// Buckets of at most `limits` bytes (the first limit for the first bucket, and so on; the last one
// for the rest) over `params` in the model's order, the last parameters' bucket first, and each
// bucket's size limit: PyTorch DDP's layout before its first step (dist._compute_bucket_assignment_by_size).
std::pair<BucketLayout, std::vector<size_t>> reversed_buckets(const std::vector<at::Tensor>& params,
                                                              const std::vector<size_t>& limits);
// DDP's buckets with find_unused_parameters (a 1 MiB first bucket, then `cap_bytes` ones): what
// stage 2 reduces.
std::pair<BucketLayout, std::vector<size_t>> ddp_buckets(const std::vector<at::Tensor>& params, int64_t cap_bytes);

class DataParallel final : public ParallelEngine {
 public:
  // Broadcasts parameters and buffers from rank 0, so every replica starts equal.
  DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist, DataParallelOptions options);

  // Around each forward that records autograd history: the buckets rebuilt when due (below), buffers
  // from rank 0 when due (BufferSync), then the Reducer is told a backward follows (unless gradients
  // are to accumulate locally, sync false: no_sync).
  void before_forward(bool sync) override;
  // The Reducer learns which outputs the backward starts from (find_unused_parameters), and the
  // outputs pass through DDP's sink where PyTorch's DDP puts them through it (parallel/ddp_sink.h).
  void after_forward(NamedTensors& outputs, bool sync) override;
  void before_local_forward() override;
  void forward_done(bool recorded_synced_gradients) override { buffer_sync_->forward_done(recorded_synced_gradients); }
  // Makes the next backward average gradients even inside no_sync (trigger_sync_in_backward).
  void sync_next_backward() override;

  // Accelerate's join_uneven_inputs (torch's Join with DDP's join hook), for processes that run
  // different numbers of training steps. Between join_begin and join_end each training forward
  // first announces that this process still trains and whether its backward averages gradients. join_end, where a process's data has ended, joins the others' collectives with zeros
  // (its buffer broadcasts, and the gradient allreduces: averages stay divided by every process)
  // until all have ended; then every replica takes the parameters and buffers of a process that
  // trained to the end.
  void join_begin() override;
  void join_end() override;
  bool joining() const { return joining_; }

  // The gradient buckets, as PyTorch's DDP lays them out: without find_unused_parameters, one bucket
  // of every parameter (per dtype) until the first backward that averages gradients; at the next
  // forward with gradients on, the Reducer rebuilds them in the order that backward produced the
  // gradients (a 1 MiB first bucket, then bucket_cap_mb ones: with bucket_cap_mb other than 25,
  // every bucket bucket_cap_mb, as Accelerate passes it on). On more than 2 processes the layout
  // decides the order in which Gloo's ring adds each element, so it is part of a checkpoint: `saved`
  // (null before the rebuild) and restored by `restore_layout`.
  const BucketLayout& layout() const { return layout_; }
  // PowerSGD's state under ddp_comm_hook power_sgd / batched_power_sgd (null otherwise).
  const std::shared_ptr<PowerSgdState>& power_sgd_state() const { return power_sgd_; }
  // The rebuild, now if it is due at the next forward (save_state: the checkpoint then holds the
  // layout of the next step). A collective where it is due: every process calls it.
  void settle_layout() { rebuild_buckets_when_due("save_state"); }
  std::optional<BucketLayout> saved_layout() const;
  // Throws unless `layout` is a layout of this model's trainable parameters (each once, a dtype and
  // a device per bucket); `where` names the file in the message.
  void check_layout(const BucketLayout& layout, const std::string& where) const;
  // Reducer buckets as `layout` (checked first), or as before the first step (nullopt). A new
  // Reducer: the next averaging backward records its order again and the rebuild after it lands on
  // the same layout, as a resumed PyTorch job's does.
  void restore_layout(const std::optional<BucketLayout>& layout);

 private:
  // A Reducer over `layout`, with the comm hook; records the layout.
  void make_reducer(BucketLayout layout, std::vector<size_t> limits);
  BucketLayout initial_layout(std::vector<size_t>* limits) const;
  // Whether the process group can allreduce bf16 (the bf16 hook and wrapper need it).
  bool group_reduces_bf16();
  int64_t cap_bytes() const;
  int64_t first_bucket_bytes() const;
  // The Reducer's rebuild, due at the first forward after the first averaging backward (a broadcast
  // of rank 0's layout: every process calls it there).
  void rebuild_buckets_when_due(const char* during);
  void broadcast(const std::vector<at::Tensor>& tensors, const std::string& name, int64_t source = 0);
  // Sums or maxima over processes, waited for.
  at::Tensor allreduce(std::vector<int64_t> values, c10d::ReduceOp op, const std::string& name);
  // In a join, a training forward's [1, gradients averaged ? 1 : 0], summed over processes;
  // waited for after the forward (check_announced_sync), so it overlaps the forward.
  void announce(bool sync);
  void finish_announcement();
  // Refuses announced sums where some processes still training average gradients and others do not.
  static void check_announced_sync(const at::Tensor& sums);
  // A joined process's side of the gradient allreduces of one backward: zeros, bucket by bucket.
  void shadow_gradient_allreduces();

  std::vector<at::Tensor> state_;    // parameters and buffers: what replicas must agree on
  std::vector<at::Tensor> params_;   // the trainable ones, the Reducer's
  std::unordered_map<size_t, std::string> names_;  // their names, for the Reducer's messages
  BucketLayout layout_;
  bool rebuilt_ = false;             // layout_ is no longer the first one
  std::unique_ptr<BufferSync> buffer_sync_;  // the model's buffers, from rank 0 at forwards as DDP
  bool joining_ = false;
  at::Tensor announcement_;
  c10::intrusive_ptr<c10d::Work> announcement_work_;
  std::shared_ptr<Distributed> dist_;
  DataParallelOptions options_;
  std::shared_ptr<c10d::Reducer> reducer_;
  // The Reducer's DDP logger, as PyTorch's DistributedDataParallel gives it one: the Reducer reports
  // to it, unchecked, when the unused parameters change between iterations (find_unused_parameters).
  // It holds the Reducer: made and dropped with it.
  std::shared_ptr<c10d::Logger> logger_;
  // static_graph: the first averaging backward allreduces every bucket at its end, once (PyTorch's
  // delayed allreduce), queued by the output sink's backward; anew for each Reducer.
  struct DelayedAllreduce {
    std::weak_ptr<c10d::Reducer> reducer;
    bool queued = false;
  };
  std::shared_ptr<DelayedAllreduce> delayed_allreduce_;
  // static_graph, and its first averaging backward has not come yet.
  bool static_graph_first_step_pending() const { return delayed_allreduce_ && !delayed_allreduce_->queued; }
  // PowerSGD's state (ddp_comm_hook power_sgd / batched_power_sgd): outlives each Reducer's hook.
  std::shared_ptr<PowerSgdState> power_sgd_;
};

}  // namespace acc

// Data-parallel gradients for a prepared model on several processes: c10d's Reducer (the engine of
// PyTorch's DistributedDataParallel) averages gradients in buckets, overlapped with backward.
#pragma once

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <memory>
#include <string>

#include "model/model.h"
#include "parallel/buffer_sync.h"
#include "parallel/parallel_engine.h"
#include "parallel/parallel_options.h"
#include "state/distributed.h"

namespace acc {

// DDP's buckets over `params` (indices into it), in the order the Reducer reduces them (the last
// parameters' bucket first), and each bucket's size limit.
std::pair<std::vector<std::vector<size_t>>, std::vector<size_t>> ddp_buckets(const std::vector<at::Tensor>& params,
                                                                             int64_t cap_bytes);

class DataParallel final : public ParallelEngine {
 public:
  // Broadcasts parameters and buffers from rank 0, so every replica starts equal.
  DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist, DataParallelOptions options);

  // Around each forward that records autograd history: buffers from rank 0 when due (BufferSync),
  // then the Reducer is told a backward follows (unless gradients are to accumulate locally, sync
  // false: no_sync).
  void before_forward(bool sync) override;
  void after_forward(const NamedTensors& outputs, bool sync) override;
  void before_local_forward() override { buffer_sync_->before_forward(); }
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

 private:
  void broadcast(const std::vector<at::Tensor>& tensors, const std::string& name, int64_t source = 0);
  // Sums or maxima over processes, waited for.
  at::Tensor allreduce(std::vector<int64_t> values, c10d::ReduceOp op, const std::string& name);
  // In a join, a training forward's [1, gradients averaged ? 1 : 0], summed over processes; not
  // waited for until the next one (finish_announcement).
  void announce(bool sync);
  void finish_announcement();
  // A joined process's side of the gradient allreduces of one backward: zeros, bucket by bucket.
  void shadow_gradient_allreduces();

  std::vector<at::Tensor> state_;    // parameters and buffers: what replicas must agree on
  std::unique_ptr<BufferSync> buffer_sync_;  // the model's buffers, from rank 0 at forwards as DDP
  std::vector<std::pair<int64_t, at::ScalarType>> buckets_;  // the Reducer's buckets: elements, dtype
  bool joining_ = false;
  at::Tensor announcement_;
  c10::intrusive_ptr<c10d::Work> announcement_work_;
  std::shared_ptr<Distributed> dist_;
  DataParallelOptions options_;
  std::unique_ptr<c10d::Reducer> reducer_;
  c10::Device bucket_device_{c10::kCPU};  // the parameters' device, where the Reducer's buckets live
};

}  // namespace acc

// Data-parallel gradients for a prepared model on several processes: c10d's Reducer (the engine of
// PyTorch's DistributedDataParallel) averages gradients in buckets, overlapped with backward.
#pragma once

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <memory>
#include <string>

#include "model/model.h"
#include "state/distributed.h"

namespace acc {

struct DataParallelOptions {
  int64_t bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  std::string comm_hook = "no";  // "no", "fp16" (the Reducer's built-in compression) or "bf16"
};

class DataParallel {
 public:
  // Broadcasts parameters and buffers from rank 0, so every replica starts equal.
  DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist, DataParallelOptions options);

  // Around each forward that records autograd history: buffers from rank 0, then the Reducer is told
  // a backward follows (unless gradients are to accumulate locally: no_sync).
  void before_forward();
  void after_forward(const NamedTensors& outputs, bool sync);
  // Makes the next backward average gradients even inside no_sync (trigger_sync_in_backward).
  void sync_next_backward();

 private:
  void broadcast(const std::vector<at::Tensor>& tensors, const std::string& name);

  std::vector<at::Tensor> buffers_;  // the model's buffers, broadcast from rank 0 before each forward
  std::shared_ptr<Distributed> dist_;
  DataParallelOptions options_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

}  // namespace acc

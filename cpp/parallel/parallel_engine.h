// What a prepared model's forward tells the engine that keeps the processes' replicas in step:
// DDP (DataParallel) or sharded data parallelism (ShardedDataParallel).
#pragma once

#include "tensor/named_tensors.h"

namespace acc {

class ParallelEngine {
 public:
  virtual ~ParallelEngine() = default;
  // Whether every forward involves the other processes (sharded parameters are gathered for
  // evaluation too); otherwise only forwards a backward can follow (training, with grad mode on).
  virtual bool every_forward() const { return false; }
  // Around such a forward. sync: whether the coming backward averages gradients (false inside
  // accumulation windows and no_sync). after_forward may replace the outputs (DDP's sink).
  virtual void before_forward(bool sync) = 0;
  virtual void after_forward(NamedTensors& outputs, bool sync) = 0;
  // Around every other forward (no gradients, or evaluation mode): PyTorch's DDP broadcasts buffers
  // at such a forward too when the one before it recorded gradients (parallel/buffer_sync.h).
  virtual void before_local_forward() {}
  // After every forward: whether it recorded gradients that its backward averages.
  virtual void forward_done(bool recorded_synced_gradients) { (void)recorded_synced_gradients; }
  // Makes the next backward average gradients even inside no_sync (trigger_sync_in_backward).
  virtual void sync_next_backward() = 0;
  // Accelerate's join_uneven_inputs.
  virtual void join_begin() = 0;
  virtual void join_end() = 0;
};

}  // namespace acc

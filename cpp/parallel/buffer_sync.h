// PyTorch DDP's buffer broadcast (broadcast_buffers): the model's buffers (BatchNorm's running
// statistics) go from process 0 to every process at the start of a forward when the forward before
// it recorded gradients outside no_sync (DDP's require_forward_param_sync, true before the first).
// So the first forward without gradients after training broadcasts (an evaluation then runs with
// process 0's statistics), the ones after it do not, nor does the forward that follows a no_sync
// micro-step or an evaluation.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "state/distributed.h"

namespace acc {

class BufferSync {
 public:
  BufferSync(std::shared_ptr<Distributed> dist, std::vector<at::Tensor> buffers, bool enabled);

  // Before a forward: broadcasts when due (a collective: every process's forward calls it).
  void before_forward();
  // After a forward (or, in join_uneven_inputs, a round of the others' forwards followed without
  // one): whether it recorded gradients that its backward averages.
  void forward_done(bool recorded_synced_gradients) { due_ = recorded_synced_gradients; }

 private:
  std::shared_ptr<Distributed> dist_;
  std::vector<at::Tensor> buffers_;  // found once (Model::to and load_state_dict keep their identity)
  bool enabled_;
  bool due_ = true;
};

}  // namespace acc

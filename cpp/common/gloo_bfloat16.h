// Gloo before libtorch 2.2 has no bfloat16 ("Invalid scalar type" for any bf16 tensor, pytorch#113557):
// a bf16 model could not be prepared, averaged or gathered on CPU processes. This process group
// moves bf16 data as its bits (broadcast, gathers, scatter, send/recv: exact) and reduces it in
// float32, rounding the sum to bf16 once (what 2.2's Gloo gives on 2 processes, where it adds two
// bf16 values in float). Other dtypes go through untouched.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "common/compat.h"

#if ACC_TORCH_VERSION < 202
namespace acc::compat {

class GlooWithBfloat16 : public c10d::ProcessGroupGloo {
 public:
  using c10d::ProcessGroupGloo::ProcessGroupGloo;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override;
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override;
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
};

}  // namespace acc::compat
#endif

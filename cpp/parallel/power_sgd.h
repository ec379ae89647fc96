// PyTorch's PowerSGD DDP communication hooks (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook),
// which Accelerate registers for comm_hook "power_sgd" / "batched_power_sgd": after
// start_powerSGD_iter plain averaging steps, a bucket's gradient matrices travel as rank-r factors
// P = M Q and Q = M^T P (two allreduces, P orthogonalised between them) and come back as P Q^T;
// what the approximation lost stays on the process and is added to its next gradients (error
// feedback). The arithmetic, its order and the random projections (numpy's RandomState seeding
// torch's generator) are PyTorch's, so the gradients are its gradients to the bit.
//
// "power_sgd" compresses each gradient matrix of a bucket (vectors and matrices too small to gain
// travel whole); "batched_power_sgd" compresses the whole bucket as one square matrix. PyTorch's
// batched hook has failed since 1.12 (its orthogonalisation asserts a batch of matrices and is
// given one); here it orthogonalises that matrix as a batch of one, the same arithmetic.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/numpy_random_state.h"
#include "parallel/power_sgd_settings.h"

namespace acc {

// PowerSGDState's state: kept across the Reducer's bucket rebuilds and in checkpoints (each
// process its own: the error feedback is local).
struct PowerSgdState {
  PowerSgdState(PowerSgdSettings s, at::Device d, std::string hook_name, std::string wire_name)
      : settings(s), device(d), hook(std::move(hook_name)), wire(std::move(wire_name)), rng(s.random_seed) {}
  // As PowerSGDState(...) made anew: plain averaging again until start_powerSGD_iter.
  void reset() {
    rng = NumpyRandomState(settings.random_seed);
    error.clear();
    p_memory.clear();
    q_memory.clear();
    iter = 0;
  }
  PowerSgdSettings settings;
  at::Device device;  // where the gradients, and so the memories, are
  std::string hook;   // "power_sgd" or "batched_power_sgd"
  std::string wire;   // the comm wrapper's dtype: "no", "fp16" or "bf16"
  NumpyRandomState rng;
  std::map<int64_t, at::Tensor> error, p_memory, q_memory;  // by bucket index
  int64_t iter = 0;  // backwards that averaged gradients
};

class PowerSgdHook final : public c10d::CommHookInterface {
 public:
  // The state's hook and wire decide what runs: layerwise or batched, and with Accelerate's
  // comm_wrapper (fp16_compress_wrapper / bf16_compress_wrapper) the bucket cast to the wire dtype
  // before the hook and the result back after.
  PowerSgdHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<PowerSgdState> state);
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

 private:
  // One bucket's compressed reduction, waited for; returns the bucket's averaged gradients.
  at::Tensor reduce_layerwise(c10d::GradBucket& bucket, at::Tensor input);
  at::Tensor reduce_batched(c10d::GradBucket& bucket, at::Tensor input);
  // The sum over processes, in place.
  void allreduce(at::Tensor& tensor, const char* what);
  void count_iteration(const c10d::GradBucket& bucket);
  // After a compressed reduction: the error kept for the next one, P and Q dropped without warm
  // start, the iteration counted.
  void finish_compression(const c10d::GradBucket& bucket, int64_t index, const at::Tensor& input_copy,
                          const at::Tensor& input);

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<PowerSgdState> state_;
};

}  // namespace acc

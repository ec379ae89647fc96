// PyTorch's ASGD (torch.optim.ASGD, averaged stochastic gradient descent, Polyak & Juditsky 1992),
// which libtorch does not have, stepped as torch.optim's one-tensor rule (_single_tensor_asgd), op
// for op. SGD with a step size eta that decays as lr / (1 + lambd * lr * step) ** alpha and a weight
// decay of lambd * eta, keeping in `ax` the average of the parameters from step t0 on (before it,
// their latest values). PyTorch keeps eta and mu as float32 numbers, so ours do too. With foreach
// (PyTorch's default for CUDA parameters, see ForeachChoice) it steps as _multi_tensor_asgd.
#pragma once

#include <torch/optim/optimizer.h>

#include "optim/rule_helpers.h"

namespace acc {

struct AsgdOptions : public torch::optim::OptimizerCloneableOptions<AsgdOptions> {
  explicit AsgdOptions(double lr = 1e-2) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, lambd) = 1e-4;  // the decay term
  TORCH_ARG(double, alpha) = 0.75;  // the power of eta's decay
  TORCH_ARG(double, t0) = 1e6;      // the step from which the parameters are averaged
  TORCH_ARG(double, weight_decay) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct AsgdParamState : public torch::optim::OptimizerCloneableParamState<AsgdParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, eta);  // the step size: a 0-dim float32 tensor on the CPU
  TORCH_ARG(at::Tensor, mu);   // the averaging weight, 1 / max(1, step - t0): the same
  TORCH_ARG(at::Tensor, ax);   // the averaged parameter
};

class Asgd final : public torch::optim::Optimizer, public ForeachChoice {
 public:
  Asgd(std::vector<torch::optim::OptimizerParamGroup> groups, const AsgdOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

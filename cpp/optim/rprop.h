// PyTorch's Rprop (torch.optim.Rprop, resilient backpropagation, Riedmiller & Braun 1993), which
// libtorch does not have, stepped as torch.optim's one-tensor rule (_single_tensor_rprop), op for
// op (1.13's and 2.x's agree). Each element has its own step size, grown by etaplus while its
// gradient keeps its sign and shrunk by etaminus when the sign flips; it moves by that step against
// the gradient's sign. The learning rate is only every step size's start, as in PyTorch.
#pragma once

#include <torch/optim/optimizer.h>

namespace acc {

struct RpropOptions : public torch::optim::OptimizerCloneableOptions<RpropOptions> {
  explicit RpropOptions(double lr = 1e-2) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, etaminus) = 0.5;  // PyTorch's etas
  TORCH_ARG(double, etaplus) = 1.2;
  TORCH_ARG(double, step_size_min) = 1e-6;  // PyTorch's step_sizes
  TORCH_ARG(double, step_size_max) = 50;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct RpropParamState : public torch::optim::OptimizerCloneableParamState<RpropParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, prev);       // the gradient of the last step (0 where its sign flipped)
  TORCH_ARG(at::Tensor, step_size);  // each element's step
};

class Rprop final : public torch::optim::Optimizer {
 public:
  Rprop(std::vector<torch::optim::OptimizerParamGroup> groups, const RpropOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

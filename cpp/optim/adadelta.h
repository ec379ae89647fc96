// PyTorch's Adadelta (torch.optim.Adadelta, Zeiler 2012), which libtorch does not have, stepped as
// torch.optim's one-tensor rule (_single_tensor_adadelta), op for op (1.13's and 2.x's agree). On
// CUDA it steps the same rule, which is PyTorch's with foreach=False.
#pragma once

#include <torch/optim/optimizer.h>

namespace acc {

struct AdadeltaOptions : public torch::optim::OptimizerCloneableOptions<AdadeltaOptions> {
  explicit AdadeltaOptions(double lr = 1.0) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, rho) = 0.9;  // how much of the running averages each step keeps
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct AdadeltaParamState : public torch::optim::OptimizerCloneableParamState<AdadeltaParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, square_avg);  // running average of the squared gradients
  TORCH_ARG(at::Tensor, acc_delta);   // running average of the squared updates
};

class Adadelta final : public torch::optim::Optimizer {
 public:
  Adadelta(std::vector<torch::optim::OptimizerParamGroup> groups, const AdadeltaOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

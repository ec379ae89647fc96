// PyTorch's Adamax (torch.optim.Adamax: Adam with the infinity norm in place of the second moment,
// Kingma & Ba 2015, section 7), which libtorch does not have, stepped as torch.optim's one-tensor
// rule (_single_tensor_adamax) of the PyTorch version built against, op for op. On CUDA it steps
// the same rule, which is PyTorch's with foreach=False.
#pragma once

#include <torch/optim/optimizer.h>

#include <tuple>

namespace acc {

struct AdamaxOptions : public torch::optim::OptimizerCloneableOptions<AdamaxOptions> {
  explicit AdamaxOptions(double lr = 2e-3) : lr_(lr) {}
  TORCH_ARG(double, lr);
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct AdamaxParamState : public torch::optim::OptimizerCloneableParamState<AdamaxParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg);  // the first moment
  TORCH_ARG(at::Tensor, exp_inf);  // the decaying maximum of |gradient| (+ eps)
};

class Adamax final : public torch::optim::Optimizer {
 public:
  Adamax(std::vector<torch::optim::OptimizerParamGroup> groups, const AdamaxOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

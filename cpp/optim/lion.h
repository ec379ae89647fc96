// Lion ("Symbolic Discovery of Optimization Algorithms", Chen et al. 2023) as a torch::optim
// optimizer. Per parameter, with gradient g and momentum m:
//   p <- p * (1 - lr * weight_decay)                      (decoupled weight decay)
//   p <- p - lr * sign(beta1 * m + (1 - beta1) * g)
//   m <- beta2 * m + (1 - beta2) * g
// Every update element is +-lr (or 0): lr is typically 3-10x smaller than AdamW's.
#pragma once

#include <torch/optim/optimizer.h>

#include <tuple>

namespace acc {

struct LionOptions : public torch::optim::OptimizerCloneableOptions<LionOptions> {
  explicit LionOptions(double lr = 1e-4) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-4;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.99);
  TORCH_ARG(double, weight_decay) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct LionParamState : public torch::optim::OptimizerCloneableParamState<LionParamState> {
  TORCH_ARG(at::Tensor, exp_avg);  // the momentum m
};

class Lion final : public torch::optim::Optimizer {
 public:
  Lion(std::vector<torch::optim::OptimizerParamGroup> groups, const LionOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

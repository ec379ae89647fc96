// PyTorch's RAdam and NAdam (torch.optim.RAdam, torch.optim.NAdam), which libtorch does not have,
// stepped as torch.optim's one-tensor rules (_single_tensor_radam, _single_tensor_nadam) of
// PyTorch 2.x, op for op, so their updates are PyTorch's to the bit; with foreach (PyTorch's
// default for CUDA parameters, see ForeachChoice) as its foreach rules (_multi_tensor_radam,
// _multi_tensor_nadam), which round otherwise.
#pragma once

#include <torch/optim/optimizer.h>

#include <tuple>

#include "optim/rule_helpers.h"

namespace acc {

// What both take; decoupled_weight_decay: the weights decay as AdamW's (else the decay is added to
// the gradient, as Adam's).
template <class Derived>
struct AdamVariantOptions : public torch::optim::OptimizerCloneableOptions<Derived> {
  explicit AdamVariantOptions(double lr) : lr_(lr) {}
  TORCH_ARG(double, lr);
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, decoupled_weight_decay) = false;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct RAdamOptions : public AdamVariantOptions<RAdamOptions> {
  explicit RAdamOptions(double lr = 1e-3) : AdamVariantOptions(lr) {}
};

struct NAdamOptions : public AdamVariantOptions<NAdamOptions> {
  explicit NAdamOptions(double lr = 2e-3) : AdamVariantOptions(lr) {}
  TORCH_ARG(double, momentum_decay) = 4e-3;  // how fast the momentum's schedule moves
};

struct AdamVariantParamState : public torch::optim::OptimizerCloneableParamState<AdamVariantParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg);
  TORCH_ARG(at::Tensor, exp_avg_sq);
  // NAdam's product of the momentum's schedule so far: a 0-dim float32 tensor on the CPU, as
  // PyTorch keeps it (its default dtype), so that each product rounds as PyTorch's does (a state
  // made from saved fields is brought to that by the algorithm's make_state).
  TORCH_ARG(at::Tensor, mu_product);
};

class RAdam final : public torch::optim::Optimizer, public ForeachChoice {
 public:
  RAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const RAdamOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

class NAdam final : public torch::optim::Optimizer, public ForeachChoice {
 public:
  NAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const NAdamOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

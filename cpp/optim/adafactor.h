// Adafactor ("Adafactor: Adaptive Learning Rates with Sublinear Memory Cost", Shazeer & Stern 2018)
// as a torch::optim optimizer, with the defaults and arithmetic of transformers' Adafactor. Per
// parameter X with gradient G, at step t:
//   step size   a = rho_t * max(eps2, RMS(X))     (RMS(X) only with scale_parameter; rho_t = lr,
//               or with relative_step min(1e-2, 1/sqrt(t)), or min(1e-6 t, 1/sqrt(t)) with warmup_init)
//   beta2_t     = 1 - t^decay_rate
//   second moment of G^2 + eps1: for a matrix (2+ dims) only its row and column means, R and C,
//               with V = R C / mean(R); for a vector the full average V
//   update      U = G / sqrt(V), divided by max(1, RMS(U) / clip_threshold), times a;
//               with beta1 averaged into a first moment, which is then the update
//   X          <- X - a * weight_decay * X - U
// The factored moments and the parameter's RMS make it the one optimizer here that is not
// elementwise. bf16/fp16 parameters are updated in float32, with float32 state, as in transformers.
#pragma once

#include <torch/optim/optimizer.h>

#include <optional>
#include <tuple>

namespace acc {

struct AdafactorOptions : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  TORCH_ARG(std::optional<double>, lr);  // none: relative_step computes the step size
  using eps_t = std::tuple<double, double>;
  TORCH_ARG(eps_t, eps) = std::make_tuple(1e-30, 1e-3);  // added to G^2; least parameter scale
  TORCH_ARG(double, clip_threshold) = 1.0;
  TORCH_ARG(double, decay_rate) = -0.8;
  TORCH_ARG(std::optional<double>, beta1);  // none: no first moment
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, scale_parameter) = true;
  TORCH_ARG(bool, relative_step) = true;
  TORCH_ARG(bool, warmup_init) = false;

 public:
  // Without lr (relative_step) there is no learning rate to read or set: both are errors.
  double get_lr() const override;
  void set_lr(const double value) override;
};

struct AdafactorParamState : public torch::optim::OptimizerCloneableParamState<AdafactorParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg);         // with beta1
  TORCH_ARG(at::Tensor, exp_avg_sq_row);  // 2+ dims: the mean over the last dimension
  TORCH_ARG(at::Tensor, exp_avg_sq_col);  // 2+ dims: the mean over the second-to-last
  TORCH_ARG(at::Tensor, exp_avg_sq);      // fewer dims
  TORCH_ARG(at::Tensor, rms);             // the parameter's RMS before the last step (0-dim)
};

class Adafactor final : public torch::optim::Optimizer {
 public:
  Adafactor(std::vector<torch::optim::OptimizerParamGroup> groups, const AdafactorOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

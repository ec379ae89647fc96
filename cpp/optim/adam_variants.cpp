#include "optim/adam_variants.h"

#include <ATen/ATen.h>

#include <cmath>
#include <type_traits>

#include "common/compat.h"
#include "common/error.h"
#include "optim/rule_helpers.h"

namespace acc {
namespace {

// Counts a step for every parameter with a gradient (its state made at its first), decays the
// weights or the gradient, moves both moments, then runs `update` on the parameter.
template <class Options, class Update>
at::Tensor step_each(torch::optim::Optimizer& optimizer, const torch::optim::Optimizer::LossClosure& closure,
                     const char* rule, Update&& update) {
  return with_closure(closure, [&] {
    for_each_with_grad<Options>(optimizer, rule, [&](at::Tensor& p, at::Tensor grad, const Options& o) {
      auto& state = state_of<AdamVariantParamState>(optimizer, p, [&] {
        auto fresh = std::make_unique<AdamVariantParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        if constexpr (std::is_same_v<Options, NAdamOptions>) fresh->mu_product(at::ones({}, at::kFloat));
        return fresh;
      });
      state.step(state.step() + 1);
      if (o.weight_decay() != 0) {
        if (o.decoupled_weight_decay())
          p.mul_(1 - o.lr() * o.weight_decay());
        else
          grad = grad.add(p, o.weight_decay());
      }
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      update_average(state.exp_avg(), grad, beta1);
      state.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      update(p, grad, state, o, beta1, beta2, static_cast<double>(state.step()));
    });
  });
}

}  // namespace

RAdam::RAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const RAdamOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<RAdamOptions>(defaults)) {}

// Adam's step, rectified: while the second moment's variance is not yet tractable (rho_t <= 5),
// an SGD-with-momentum step.
at::Tensor RAdam::step(LossClosure closure) {
  return step_each<RAdamOptions>(
      *this, closure, "RAdam",
      [](at::Tensor& p, const at::Tensor&, AdamVariantParamState& s, const RAdamOptions& o, double beta1, double beta2,
         double step) {
        const double bias_correction1 = 1 - std::pow(beta1, step);
        const double bias_correction2 = 1 - std::pow(beta2, step);
        const at::Tensor corrected = s.exp_avg() / bias_correction1;
        const double rho_inf = 2 / (1 - beta2) - 1;
        const double rho_t = rho_inf - 2 * step * std::pow(beta2, step) / bias_correction2;
        if (rho_t > 5.0) {
          // Python's (bias_correction2 ** 0.5) / tensor is tensor.reciprocal() * scalar.
          const at::Tensor adaptive = s.exp_avg_sq().sqrt().add_(o.eps()).reciprocal() * python_sqrt(bias_correction2);
          const double rect =
              python_sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
          p.add_(corrected * o.lr() * adaptive * rect, -1.0);
        } else {
          p.add_(corrected * o.lr(), -1.0);
        }
      });
}

NAdam::NAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const NAdamOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<NAdamOptions>(defaults)) {}

// Adam with Nesterov momentum, whose coefficient follows a schedule (mu) over the steps.
at::Tensor NAdam::step(LossClosure closure) {
  return step_each<NAdamOptions>(
      *this, closure, "NAdam",
      [](at::Tensor& p, const at::Tensor& grad, AdamVariantParamState& s, const NAdamOptions& o, double beta1,
         double beta2, double step) {
        const double bias_correction2 = 1 - std::pow(beta2, step);
        const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, step * o.momentum_decay()));
        const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * o.momentum_decay()));
        s.mu_product().mul_(mu);
        const double mu_product = s.mu_product().item<double>();
        // 1.x multiplied the float32 product by mu a second time (fixed in 2.0).
        const double mu_product_next =
            compat::kPythonOptimizers2 ? mu_product * mu_next : (s.mu_product() * mu * mu_next).item<double>();
        at::Tensor denom = s.exp_avg_sq().div(bias_correction2).sqrt();
        denom.add_(o.eps());
        p.addcdiv_(grad, denom, -o.lr() * (1.0 - mu) / (1.0 - mu_product));
        p.addcdiv_(s.exp_avg(), denom, (-o.lr() * mu_next) / (1.0 - mu_product_next));
      });
}

}  // namespace acc

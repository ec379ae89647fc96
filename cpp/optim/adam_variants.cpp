#include "optim/adam_variants.h"

#include <ATen/ATen.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "common/compat.h"
#include "common/error.h"
#include "optim/rule_helpers.h"

namespace acc {
namespace {

// One parameter's tensors for a step; its step is already counted.
struct VariantSlot {
  at::Tensor param, grad;
  AdamVariantParamState* state;
};

// Counts a step for every parameter with a gradient (its state made at its first), then steps each
// group's parameters: one by one with `single` (the one-tensor rule), or by device and dtype with
// `foreach` (the foreach rule) where `choice` says so.
template <class Options, class Single, class Foreach>
at::Tensor step_groups(torch::optim::Optimizer& optimizer, const ForeachChoice& choice,
                       const torch::optim::Optimizer::LossClosure& closure, const char* rule, Single&& single,
                       Foreach&& foreach) {
  return with_closure(closure, [&] {
    for (auto& group : optimizer.param_groups()) {
      const auto& o = static_cast<const Options&>(group.options());
      ForeachGroups<VariantSlot> by_foreach;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const at::Tensor& grad = dense_grad(p, rule);
        auto& state = state_of<AdamVariantParamState>(optimizer, p, [&] {
          auto fresh = std::make_unique<AdamVariantParamState>();
          fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          if constexpr (std::is_same_v<Options, NAdamOptions>) fresh->mu_product(at::ones({}, at::kFloat));
          return fresh;
        });
        state.step(state.step() + 1);
        if (choice.steps_by_foreach(p))
          by_foreach.of(p).push_back(VariantSlot{p, grad, &state});
        else
          single(p, grad, state, o);
      }
      by_foreach.for_each([&](const std::vector<VariantSlot>& slots) { foreach(slots, o); });
    }
  });
}

// The one-tensor rules' common start: the weights or the gradient decay, both moments move.
// Returns the gradient the rule goes on with.
template <class Options>
at::Tensor decay_and_move_moments(at::Tensor& p, at::Tensor grad, AdamVariantParamState& state, const Options& o) {
  if (o.weight_decay() != 0) {
    if (o.decoupled_weight_decay())
      p.mul_(1 - o.lr() * o.weight_decay());
    else
      grad = grad.add(p, o.weight_decay());
  }
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  update_average(state.exp_avg(), grad, beta1);
  state.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  return grad;
}

// The same for the foreach rules (PyTorch 2.x's _multi_tensor_radam and _multi_tensor_nadam), on the
// lists of one device and dtype.
struct VariantLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<double> steps;
};

template <class Options>
VariantLists decay_and_move_moments(const std::vector<VariantSlot>& slots, const Options& o) {
  VariantLists l;
  for (const VariantSlot& s : slots) {
    l.params.push_back(s.param);
    l.grads.push_back(s.grad);
    l.exp_avgs.push_back(s.state->exp_avg());
    l.exp_avg_sqs.push_back(s.state->exp_avg_sq());
    l.steps.push_back(static_cast<double>(s.state->step()));
  }
#if ACC_PYTHON_OPTIMIZERS_2
  if (o.weight_decay() != 0) {
    if (o.decoupled_weight_decay())
      at::_foreach_mul_(l.params, 1 - o.lr() * o.weight_decay());
    else
      l.grads = at::_foreach_add(l.grads, l.params, o.weight_decay());
  }
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  at::_foreach_lerp_(l.exp_avgs, l.grads, 1 - beta1);
  at::_foreach_mul_(l.exp_avg_sqs, beta2);
  at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1 - beta2);
#else
  (void)o;  // never called: foreach=true needs PyTorch 2.x (TorchOptimizer refuses it before)
#endif
  return l;
}

}  // namespace

RAdam::RAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const RAdamOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<RAdamOptions>(defaults)) {}

// Adam's step, rectified: while the second moment's variance is not yet tractable (rho_t <= 5),
// an SGD-with-momentum step.
at::Tensor RAdam::step(LossClosure closure) {
  return step_groups<RAdamOptions>(
      *this, *this, closure, "RAdam",
      [](at::Tensor& p, const at::Tensor& g, AdamVariantParamState& s, const RAdamOptions& o) {
        decay_and_move_moments(p, g, s, o);
        const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
        const double step = static_cast<double>(s.step());
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
      },
      // _multi_tensor_radam: both cases in one expression, where the unrectified step divides by -0.
      [](const std::vector<VariantSlot>& slots, const RAdamOptions& o) {
        VariantLists l = decay_and_move_moments(slots, o);
#if ACC_PYTHON_OPTIMIZERS_2
        const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
        const double rho_inf = 2 / (1 - beta2) - 1;
        std::vector<at::Scalar> unrect_step_size, bias_correction2;
        for (const double step : l.steps) {
          const double rho_t = rho_inf - 2 * step * std::pow(beta2, step) / (1 - std::pow(beta2, step));
          const double rect =
              rho_t > 5 ? std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5)
                        : 0.0;
          const double unrectified = rect > 0 ? 0.0 : 1.0;
          const double bias_correction1 = 1 - std::pow(beta1, step);
          unrect_step_size.emplace_back((o.lr() * unrectified / bias_correction1) * -1);
          bias_correction2.emplace_back(std::pow(1 - std::pow(beta2, step), 0.5) * (o.lr() * rect / bias_correction1) *
                                        -1);
        }
        std::vector<at::Tensor> buffer = at::_foreach_sqrt(l.exp_avg_sqs);
        at::_foreach_add_(buffer, o.eps());
        at::_foreach_div_(buffer, bias_correction2);
        at::_foreach_reciprocal_(buffer);
        at::_foreach_add_(buffer, unrect_step_size);
        at::_foreach_addcmul_(l.params, l.exp_avgs, buffer);
#endif
      });
}

NAdam::NAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const NAdamOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<NAdamOptions>(defaults)) {}

// Adam with Nesterov momentum, whose coefficient follows a schedule (mu) over the steps.
at::Tensor NAdam::step(LossClosure closure) {
  return step_groups<NAdamOptions>(
      *this, *this, closure, "NAdam",
      [](at::Tensor& p, const at::Tensor& g, AdamVariantParamState& s, const NAdamOptions& o) {
        const at::Tensor grad = decay_and_move_moments(p, g, s, o);
        const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
        const double step = static_cast<double>(s.step());
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
      },
      // _multi_tensor_nadam: the denominator is sqrt(v) / sqrt(1 - beta2^t) + eps.
      [](const std::vector<VariantSlot>& slots, const NAdamOptions& o) {
        VariantLists l = decay_and_move_moments(slots, o);
#if ACC_PYTHON_OPTIMIZERS_2
        const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
        std::vector<at::Tensor> mu_products;
        std::vector<at::Scalar> bias_correction_sqrt, mus;
        std::vector<double> mu_nexts;
        for (size_t i = 0; i < slots.size(); ++i) {
          const double step = l.steps[i];
          mu_products.push_back(slots[i].state->mu_product());
          bias_correction_sqrt.emplace_back(std::pow(1 - std::pow(beta2, step), 0.5));
          mus.emplace_back(beta1 * (1.0 - 0.5 * std::pow(0.96, step * o.momentum_decay())));
          mu_nexts.push_back(beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * o.momentum_decay())));
        }
        std::vector<at::Tensor> exp_avg_sq_sqrt = at::_foreach_sqrt(l.exp_avg_sqs);
        at::_foreach_mul_(mu_products, mus);
        at::_foreach_div_(exp_avg_sq_sqrt, bias_correction_sqrt);
        at::_foreach_add_(exp_avg_sq_sqrt, o.eps());
        std::vector<at::Scalar> step_size_grads, step_size_exp_avg;
        for (size_t i = 0; i < slots.size(); ++i) {
          const double mu = mus[i].toDouble(), mu_next = mu_nexts[i];
          const double mu_product = mu_products[i].item<double>();
          step_size_grads.emplace_back((o.lr() * (1.0 - mu) / (1.0 - mu_product)) * -1);
          step_size_exp_avg.emplace_back((o.lr() * mu_next / (1.0 - mu_product * mu_next)) * -1);
        }
        at::_foreach_addcdiv_(l.params, l.grads, exp_avg_sq_sqrt, step_size_grads);
        at::_foreach_addcdiv_(l.params, l.exp_avgs, exp_avg_sq_sqrt, step_size_exp_avg);
#endif
      });
}

}  // namespace acc

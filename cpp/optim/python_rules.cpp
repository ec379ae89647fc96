#include "optim/python_rules.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "common/compat.h"
#include "common/error.h"
#include "optim/rule_helpers.h"

namespace acc {
namespace {


// ---- Adam and AdamW ----

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  bool decoupled;  // AdamW: the weights decay; Adam: the decay is added to the gradient
};

template <class Options>
AdamHyper adam_hyper(const Options& o, bool decoupled) {
  return {o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), o.amsgrad(), decoupled};
}

// One parameter's tensors for a step; step is already counted.
struct AdamSlot {
  at::Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  double step;
};

// _single_tensor_adam / _single_tensor_adamw (not capturable): Python's rule on CPU.
void adam_single(const AdamSlot& s, const AdamHyper& h) {
  at::Tensor grad = s.grad;
  if (h.decoupled)
    s.param.mul_(1 - h.lr * h.weight_decay);
  else if (h.weight_decay != 0)
    grad = grad.add(s.param, h.weight_decay);
  update_average(s.exp_avg, grad, h.beta1);
  s.exp_avg_sq.mul_(h.beta2).addcmul_(grad, grad, 1 - h.beta2);
  const double bias_correction1 = 1 - std::pow(h.beta1, s.step);
  const double bias_correction2 = 1 - std::pow(h.beta2, s.step);
  const double step_size = h.lr / bias_correction1;
  const double bias_correction2_sqrt = python_sqrt(bias_correction2);
  at::Tensor second = s.exp_avg_sq;
  if (h.amsgrad) {
    second = s.max_exp_avg_sq;  // the running maximum, updated in place
    at::maximum_out(second, second, s.exp_avg_sq);
  }
  const at::Tensor denom = (second.sqrt() / bias_correction2_sqrt).add_(h.eps);
  s.param.addcdiv_(s.exp_avg, denom, -step_size);
}

// _multi_tensor_adam / _multi_tensor_adamw (not capturable): Python's rule on CUDA, for the
// parameters of one device and dtype (Python groups them so before its foreach ops).
void adam_foreach(const std::vector<const AdamSlot*>& slots, const AdamHyper& h) {
#if ACC_PYTHON_OPTIMIZERS_2
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<at::Scalar> step_size, bias_correction2_sqrt;
  for (const AdamSlot* s : slots) {
    params.push_back(s->param);
    grads.push_back(s->grad);
    exp_avgs.push_back(s->exp_avg);
    exp_avg_sqs.push_back(s->exp_avg_sq);
    if (h.amsgrad) max_exp_avg_sqs.push_back(s->max_exp_avg_sq);
    step_size.emplace_back((h.lr / (1 - std::pow(h.beta1, s->step))) * -1);
    bias_correction2_sqrt.emplace_back(std::pow(1 - std::pow(h.beta2, s->step), 0.5));
  }
  if (h.decoupled) {
    if (h.weight_decay != 0) at::_foreach_mul_(params, 1 - h.lr * h.weight_decay);
  } else if (h.weight_decay != 0) {
    grads = at::_foreach_add(grads, params, h.weight_decay);
  }
  at::_foreach_lerp_(exp_avgs, grads, 1 - h.beta1);
  at::_foreach_mul_(exp_avg_sqs, h.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - h.beta2);
  std::vector<at::Tensor> denom;
  if (h.amsgrad) {
    at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
    denom = at::_foreach_sqrt(max_exp_avg_sqs);
  } else {
    denom = at::_foreach_sqrt(exp_avg_sqs);
  }
  at::_foreach_div_(denom, bias_correction2_sqrt);
  at::_foreach_add_(denom, h.eps);
  at::_foreach_addcdiv_(params, exp_avgs, denom, step_size);
#else
  (void)slots;  // never called: 1.13's Python stepped CUDA tensors one by one
  (void)h;
#endif
}

// Counts a step for every parameter with a gradient (making its state at its first), then applies
// the rule: one by one on CPU, by foreach ops per device and dtype on CUDA, as Python chooses.
template <class Options, class State, class Rule>
void adam_step(Rule& optimizer, bool decoupled, const char* rule) {
  for (auto& group : optimizer.param_groups()) {
    const AdamHyper h = adam_hyper(static_cast<const Options&>(group.options()), decoupled);
    std::vector<AdamSlot> slots;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& grad = dense_grad(p, rule);
      auto& state = state_of<State>(optimizer, p, [&] { return new_adam_state<State>(p, h.amsgrad); });
      state.step(state.step() + 1);
      slots.push_back(
          {p, grad, state.exp_avg(), state.exp_avg_sq(), state.max_exp_avg_sq(), static_cast<double>(state.step())});
    }
    ForeachGroups<const AdamSlot*> by_foreach;
    for (const AdamSlot& s : slots) {
      if (optimizer.steps_by_foreach(s.param))
        by_foreach.of(s.param).push_back(&s);
      else
        adam_single(s, h);
    }
    by_foreach.for_each([&](const std::vector<const AdamSlot*>& group) { adam_foreach(group, h); });
  }
}

// ---- Adagrad ----

struct AdagradSlot {
  at::Tensor param, grad, sum;
  double step;  // already counted
};

// _multi_tensor_adagrad (dense gradients): Python's rule on CUDA, for one device and dtype.
void adagrad_foreach(const std::vector<AdagradSlot>& slots, const torch::optim::AdagradOptions& o) {
#if ACC_PYTHON_OPTIMIZERS_2
  std::vector<at::Tensor> params, grads, sums;
  std::vector<at::Scalar> minus_clr;
  for (const AdagradSlot& s : slots) {
    params.push_back(s.param);
    grads.push_back(s.grad);
    sums.push_back(s.sum);
    minus_clr.emplace_back(-o.lr() / (1 + (s.step - 1) * o.lr_decay()));
  }
  if (o.weight_decay() != 0) grads = at::_foreach_add(grads, params, o.weight_decay());
  at::_foreach_addcmul_(sums, grads, grads, 1);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(sums);  // Python's std
  at::_foreach_add_(denom, o.eps());
  std::vector<at::Tensor> numerator;
  if (o.weight_decay() != 0) {  // the decayed gradients are fresh tensors: scaled in place
    at::_foreach_mul_(grads, minus_clr);
    numerator = grads;
  } else {
    numerator = at::_foreach_mul(grads, minus_clr);
  }
  at::_foreach_addcdiv_(params, numerator, denom);
#else
  (void)slots;  // never called: 1.13's Python stepped CUDA tensors one by one
  (void)o;
#endif
}

}  // namespace

template <>
at::Tensor PythonAdam::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(*this, false, "Adam");
  });
}

template <>
at::Tensor PythonAdamW::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(*this, true, "AdamW");
  });
}

// _single_tensor_rmsprop; Python's foreach rule on CUDA rounds as this one does.
template <>
at::Tensor PythonRmsProp::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    using Options = torch::optim::RMSpropOptions;
    for_each_with_grad<Options>(*this, "RMSprop", [&](at::Tensor& p, at::Tensor grad, const Options& o) {
        auto& state = state_of<torch::optim::RMSpropParamState>(*this, p, [&] {
          auto fresh = std::make_unique<torch::optim::RMSpropParamState>();
          fresh->step(0);
          fresh->square_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (o.momentum() > 0) fresh->momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (o.centered()) fresh->grad_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          return fresh;
        });
        state.step(state.step() + 1);
        if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
        state.square_avg().mul_(o.alpha()).addcmul_(grad, grad, 1 - o.alpha());
        at::Tensor avg;
        if (o.centered()) {
          update_average(state.grad_avg(), grad, o.alpha());
          avg = state.square_avg().addcmul(state.grad_avg(), state.grad_avg(), -1).sqrt_();
        } else {
          avg = state.square_avg().sqrt();
        }
        avg.add_(o.eps());
        if (o.momentum() > 0) {
          state.momentum_buffer().mul_(o.momentum()).addcdiv_(grad, avg);
          p.add_(state.momentum_buffer(), -o.lr());
        } else {
          p.addcdiv_(grad, avg, -o.lr());
        }
    });
  });
}

// _single_tensor_adagrad on CPU; on CUDA the foreach rule, per device and dtype. Every parameter
// has its accumulator from the optimizer's creation (algorithm_adagrad.cpp).
template <>
at::Tensor PythonAdagrad::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::AdagradOptions&>(group.options());
      ForeachGroups<AdagradSlot> by_foreach;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        at::Tensor grad = dense_grad(p, "Adagrad");
        auto& state = adagrad_state(*this, p);
        state.step(state.step() + 1);
        const double step = static_cast<double>(state.step());
        if (steps_by_foreach(p)) {
          by_foreach.of(p).push_back(AdagradSlot{p, grad, state.sum(), step});
          continue;
        }
        if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
        const double clr = o.lr() / (1 + (step - 1) * o.lr_decay());
        state.sum().addcmul_(grad, grad, 1.0);
        const at::Tensor denom = state.sum().sqrt().add_(o.eps());
        p.addcdiv_(grad, denom, -clr);
      }
      by_foreach.for_each([&](const std::vector<AdagradSlot>& group) { adagrad_foreach(group, o); });
    }
  });
}

}  // namespace acc

#include "optim/fused_rules.h"

#include <ATen/ATen.h>

#include <vector>

#include "common/compat.h"
#include "common/error.h"
#include "optim/python_rules.h"
#include "optim/rule_helpers.h"

namespace acc {
namespace {

// The tensors one kernel call takes: those of one device and dtype, as torch.optim groups them.
struct Batch {
  std::vector<at::Tensor> params, grads, first, second, third, steps;
};
using Batches = DeviceDtypeGroups<Batch>;

template <class Options, class State, bool kDecoupled>
void fused_adam(torch::optim::Optimizer& optimizer, bool maximize, const char* rule) {
#if ACC_FUSED_OPTIMIZERS
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const Options&>(group.options());
    Batches batches;
    StepTensors steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& grad = dense_grad(p, rule);
      auto& s = state_of<State>(optimizer, p, [&] { return new_adam_state<State>(p, o.amsgrad()); });
      s.step(s.step() + 1);
      Batch& b = batches.of(p);
      b.params.push_back(p);
      b.grads.push_back(grad);
      b.first.push_back(s.exp_avg());
      b.second.push_back(s.exp_avg_sq());
      if (o.amsgrad()) b.third.push_back(s.max_exp_avg_sq());
      b.steps.push_back(steps.get(p, s.step()));
    }
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    batches.for_each([&](const Batch& b) {
      if constexpr (kDecoupled)
        at::_fused_adamw_(b.params, b.grads, b.first, b.second, b.third, b.steps, o.lr(), beta1, beta2,
                          o.weight_decay(), o.eps(), o.amsgrad(), maximize);
      else
        at::_fused_adam_(b.params, b.grads, b.first, b.second, b.third, b.steps, o.lr(), beta1, beta2, o.weight_decay(),
                         o.eps(), o.amsgrad(), maximize);
    });
  }
#else
  (void)optimizer;
  (void)maximize;
  fail(Status::Unsupported, rule, " with fused=true needs PyTorch 2.4 or later");
#endif
}

}  // namespace

// _fused_sgd: a parameter's first momentum buffer is its gradient, which the kernel writes into an
// empty buffer when told it is the first step. (torch.optim tells it so only when no parameter of
// the group has a buffer yet; a parameter whose first gradient comes later gets one here as it
// would unfused.)
template <>
at::Tensor FusedSgd::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
#if ACC_FUSED_OPTIMIZERS
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
      const bool momentum = o.momentum() != 0;
      Batches later, first;  // parameters with a buffer, and those getting theirs now
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const at::Tensor& grad = dense_grad(p, "SGD");
        Batches* batches = &later;
        at::Tensor buffer;
        if (momentum) {
          auto& slot = state_[compat::optimizer_state_key(p)];
          if (!slot) {
            auto fresh = std::make_unique<torch::optim::SGDParamState>();
            fresh->momentum_buffer(at::empty_like(grad, at::MemoryFormat::Preserve));
            slot = std::move(fresh);
            batches = &first;
          }
          buffer = static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer();
        }
        Batch& b = batches->of(p);
        b.params.push_back(p);
        b.grads.push_back(grad);
        if (momentum) b.first.push_back(buffer);
      }
      for (const Batches* batches : {&later, &first})
        batches->for_each([&](const Batch& b) {
          at::_fused_sgd_(b.params, b.grads, b.first, o.weight_decay(), o.momentum(), o.lr(), o.dampening(),
                          o.nesterov(), maximize_, /*is_first_step=*/batches == &first);
        });
    }
#else
    fail(Status::Unsupported, "SGD with fused=true needs PyTorch 2.4 or later");
#endif
  });
}

template <>
at::Tensor FusedAdam::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    fused_adam<torch::optim::AdamOptions, torch::optim::AdamParamState, false>(*this, maximize_, "Adam");
  });
}

template <>
at::Tensor FusedAdamW::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
    fused_adam<torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>(*this, maximize_, "AdamW");
  });
}

// Every parameter has its accumulator from the optimizer's creation (algorithm_adagrad.cpp).
template <>
at::Tensor FusedAdagrad::step(torch::optim::Optimizer::LossClosure closure) {
  return with_closure(closure, [&] {
#if ACC_FUSED_OPTIMIZERS
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::AdagradOptions&>(group.options());
      Batches batches;
      StepTensors steps;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const at::Tensor& grad = dense_grad(p, "Adagrad");
        require(p.is_cpu(), "Adagrad with fused=true runs on the CPU only, as PyTorch's (a parameter is on ",
                p.device().str(), ")");
        auto& s = adagrad_state(*this, p);
        s.step(s.step() + 1);
        Batch& b = batches.of(p);
        b.params.push_back(p);
        b.grads.push_back(grad);
        b.first.push_back(s.sum());
        b.steps.push_back(steps.get(p, s.step()));
      }
      batches.for_each([&](const Batch& b) {
        at::_fused_adagrad_(b.params, b.grads, b.first, b.steps, o.lr(), o.lr_decay(), o.weight_decay(), o.eps(),
                            maximize_);
      });
    }
#else
    fail(Status::Unsupported, "Adagrad with fused=true needs PyTorch 2.4 or later");
#endif
  });
}

}  // namespace acc

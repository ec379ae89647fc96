#include "optim/asgd.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "optim/rule_helpers.h"

namespace acc {

Asgd::Asgd(std::vector<torch::optim::OptimizerParamGroup> groups, const AsgdOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AsgdOptions>(defaults)) {}

namespace {

struct AsgdSlot {
  at::Tensor param, grad;
  AsgdParamState* state;
};

// _single_tensor_asgd.
void asgd_single(at::Tensor& p, at::Tensor grad, AsgdParamState& s, const AsgdOptions& o) {
  const double step = static_cast<double>(s.step());
  if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
  const double eta = s.eta().item<double>();
  p.mul_(1 - o.lambd() * eta);
  p.add_(grad, -eta);
  if (s.mu().item<double>() != 1)
    s.ax().add_(p.sub(s.ax()).mul(s.mu()));
  else
    s.ax().copy_(p);
  // Python's lr / (1 + lambd * lr * step) ** alpha and 1 / max(1, step - t0), kept as float32.
  s.eta().fill_(o.lr() / std::pow(1 + o.lambd() * o.lr() * step, o.alpha()));
  s.mu().fill_(1 / std::max(1.0, step - o.t0()));
}

// _multi_tensor_asgd (PyTorch 2.x) on the parameters of one device and dtype: the decay and the
// gradient in one addcmul, the average always moved, and eta computed from the float32 step count
// on the parameters' device, where PyTorch keeps its eta, mu and step.
void asgd_foreach(const std::vector<AsgdSlot>& slots, const AsgdOptions& o) {
#if ACC_PYTHON_OPTIMIZERS_2
  std::vector<at::Tensor> params, grads, axs, etas, mus;
  for (const AsgdSlot& s : slots) {
    params.push_back(s.param);
    grads.push_back(s.grad);
    axs.push_back(s.state->ax());
    etas.push_back(s.state->eta().to(s.param.device()));
    mus.push_back(s.state->mu().to(s.param.device()));
  }
  std::vector<at::Tensor> intermediate;
  if (o.weight_decay() != 0) {
    intermediate = at::_foreach_add(grads, params, o.weight_decay());
    at::_foreach_add_(intermediate, params, o.lambd());
  } else {
    intermediate = at::_foreach_add(grads, params, o.lambd());
  }
  at::_foreach_addcmul_(params, intermediate, etas, -1);
  intermediate = at::_foreach_sub(params, axs);
  at::_foreach_addcmul_(axs, intermediate, mus);
  StepTensors steps;
  for (const AsgdSlot& s : slots) {
    const at::Tensor& step = steps.get(s.param, s.state->step());
    // Python's lr / ((1 + lambd * lr * step) ** alpha) with step a tensor: lr / x is x.reciprocal() * lr.
    const at::Tensor eta = at::pow(at::add(at::mul(step, o.lambd() * o.lr()), 1), o.alpha()).reciprocal() * o.lr();
    s.state->eta().copy_(eta);
    s.state->mu().fill_(1 / std::max(1.0, static_cast<double>(s.state->step()) - o.t0()));
  }
#else
  (void)slots;  // never called: foreach=true needs PyTorch 2.x (TorchOptimizer refuses it before)
  (void)o;
#endif
}

}  // namespace

at::Tensor Asgd::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const AsgdOptions&>(group.options());
      ForeachGroups<AsgdSlot> by_foreach;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const at::Tensor& grad = dense_grad(p, "ASGD");
        auto& s = state_of<AsgdParamState>(*this, p, [&] {
          auto fresh = std::make_unique<AsgdParamState>();
          fresh->eta(at::scalar_tensor(o.lr(), at::kFloat));
          fresh->mu(at::ones({}, at::kFloat));
          fresh->ax(at::zeros_like(p, at::MemoryFormat::Preserve));
          return fresh;
        });
        s.step(s.step() + 1);
        if (steps_by_foreach(p))
          by_foreach.of(p).push_back(AsgdSlot{p, grad, &s});
        else
          asgd_single(p, grad, s, o);
      }
      by_foreach.for_each([&](const std::vector<AsgdSlot>& slots) { asgd_foreach(slots, o); });
    }
  });
}

}  // namespace acc

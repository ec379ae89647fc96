#include "optim/asgd.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "optim/rule_helpers.h"

namespace acc {

Asgd::Asgd(std::vector<torch::optim::OptimizerParamGroup> groups, const AsgdOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AsgdOptions>(defaults)) {}

at::Tensor Asgd::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<AsgdOptions>(*this, "ASGD", [&](at::Tensor& p, at::Tensor grad, const AsgdOptions& o) {
      auto& s = state_of<AsgdParamState>(*this, p, [&] {
        auto fresh = std::make_unique<AsgdParamState>();
        fresh->eta(at::scalar_tensor(o.lr(), at::kFloat));
        fresh->mu(at::ones({}, at::kFloat));
        fresh->ax(at::zeros_like(p, at::MemoryFormat::Preserve));
        return fresh;
      });
      s.step(s.step() + 1);
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
    });
  });
}

}  // namespace acc

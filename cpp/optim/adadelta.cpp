#include "optim/adadelta.h"

#include <ATen/ATen.h>

#include "optim/rule_helpers.h"

namespace acc {

Adadelta::Adadelta(std::vector<torch::optim::OptimizerParamGroup> groups, const AdadeltaOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AdadeltaOptions>(defaults)) {}

at::Tensor Adadelta::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<AdadeltaOptions>(
        *this, "Adadelta", [&](at::Tensor& p, at::Tensor grad, const AdadeltaOptions& o) {
          auto& s = state_of<AdadeltaParamState>(*this, p, [&] {
            auto fresh = std::make_unique<AdadeltaParamState>();
            fresh->square_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
            fresh->acc_delta(at::zeros_like(p, at::MemoryFormat::Preserve));
            return fresh;
          });
          s.step(s.step() + 1);
          const double rho = o.rho();
          if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
          s.square_avg().mul_(rho).addcmul_(grad, grad, 1 - rho);
          // Python's std and delta: the update is RMS(updates) / RMS(gradients) * gradient.
          const at::Tensor grad_rms = s.square_avg().add(o.eps()).sqrt_();
          const at::Tensor delta = s.acc_delta().add(o.eps()).sqrt_().div_(grad_rms).mul_(grad);
          s.acc_delta().mul_(rho).addcmul_(delta, delta, 1 - rho);
          p.add_(delta, -o.lr());
        });
  });
}

}  // namespace acc

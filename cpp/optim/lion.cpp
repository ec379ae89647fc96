#include "optim/lion.h"

#include <ATen/ATen.h>

#include "common/compat.h"
#include "common/error.h"

namespace acc {

Lion::Lion(std::vector<torch::optim::OptimizerParamGroup> groups, const LionOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<LionOptions>(defaults)) {}

at::Tensor Lion::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const LionOptions&>(group.options());
    const double lr = o.lr(), decay = o.weight_decay();
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& grad = p.grad();
      require(!grad.is_sparse(), "Lion does not support sparse gradients");
      auto& slot = state_[compat::optimizer_state_key(p)];
      if (!slot) {
        auto fresh = std::make_unique<LionParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      at::Tensor& exp_avg = static_cast<LionParamState&>(*slot).exp_avg();
      if (decay != 0) p.mul_(1.0 - lr * decay);  // multiplying by 1 would change nothing
      // The update interpolates with beta1, the momentum then tracks the gradient with beta2.
      const at::Tensor update = exp_avg.mul(beta1).add_(grad, 1.0 - beta1).sign_();
      p.add_(update, -lr);
      exp_avg.mul_(beta2).add_(grad, 1.0 - beta2);
    }
  }
  return loss;
}

}  // namespace acc

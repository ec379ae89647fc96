#include "optim/lion.h"

#include <ATen/ATen.h>

#include "optim/rule_helpers.h"

namespace acc {

Lion::Lion(std::vector<torch::optim::OptimizerParamGroup> groups, const LionOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<LionOptions>(defaults)) {}

at::Tensor Lion::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<LionOptions>(*this, "Lion", [&](at::Tensor& p, const at::Tensor& grad, const LionOptions& o) {
      auto& state = state_of<LionParamState>(*this, p, [&] {
        auto fresh = std::make_unique<LionParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        return fresh;
      });
      const double lr = o.lr(), decay = o.weight_decay();
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      at::Tensor& exp_avg = state.exp_avg();
      if (decay != 0) p.mul_(1.0 - lr * decay);  // multiplying by 1 would change nothing
      // The update interpolates with beta1, the momentum then tracks the gradient with beta2.
      const at::Tensor update = exp_avg.mul(beta1).add_(grad, 1.0 - beta1).sign_();
      p.add_(update, -lr);
      exp_avg.mul_(beta2).add_(grad, 1.0 - beta2);
    });
  });
}

}  // namespace acc

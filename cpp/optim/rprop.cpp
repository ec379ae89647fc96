#include "optim/rprop.h"

#include <ATen/ATen.h>

#include "optim/rule_helpers.h"

namespace acc {

Rprop::Rprop(std::vector<torch::optim::OptimizerParamGroup> groups, const RpropOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<RpropOptions>(defaults)) {}

at::Tensor Rprop::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<RpropOptions>(*this, "Rprop", [&](at::Tensor& p, const at::Tensor& grad, const RpropOptions& o) {
      auto& s = state_of<RpropParamState>(*this, p, [&] {
        auto fresh = std::make_unique<RpropParamState>();
        fresh->prev(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->step_size(at::full_like(grad, o.lr()));
        return fresh;
      });
      s.step(s.step() + 1);
      // The sign of gradient times previous gradient becomes each step size's factor, assigned in
      // PyTorch's order (a NaN stays NaN).
      at::Tensor factor = grad.mul(s.prev()).sign();
      factor.masked_fill_(factor.gt(0), o.etaplus());
      factor.masked_fill_(factor.lt(0), o.etaminus());
      factor.masked_fill_(factor.eq(0), 1);
      s.step_size().mul_(factor).clamp_(o.step_size_min(), o.step_size_max());
      // Where the sign flipped the element does not move, and the next step starts afresh there.
      at::Tensor moved = grad.clone(at::MemoryFormat::Preserve);
      moved.masked_fill_(factor.eq(o.etaminus()), 0);
      p.addcmul_(moved.sign(), s.step_size(), -1);
      s.prev().copy_(moved);
    });
  });
}

}  // namespace acc

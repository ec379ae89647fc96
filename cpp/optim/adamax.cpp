#include "optim/adamax.h"

#include <ATen/ATen.h>

#include <cmath>

#include "optim/rule_helpers.h"

namespace acc {

Adamax::Adamax(std::vector<torch::optim::OptimizerParamGroup> groups, const AdamaxOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AdamaxOptions>(defaults)) {}

at::Tensor Adamax::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<AdamaxOptions>(*this, "Adamax", [&](at::Tensor& p, at::Tensor grad, const AdamaxOptions& o) {
      auto& s = state_of<AdamaxParamState>(*this, p, [&] {
        auto fresh = std::make_unique<AdamaxParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_inf(at::zeros_like(p, at::MemoryFormat::Preserve));
        return fresh;
      });
      s.step(s.step() + 1);
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
      update_average(s.exp_avg(), grad, beta1);
      // 1.x took the maximum through cat and amax, 2.x through maximum: the same values.
      at::maximum_out(s.exp_inf(), s.exp_inf().mul_(beta2), grad.abs().add_(o.eps()));
      const double clr = o.lr() / (1 - std::pow(beta1, static_cast<double>(s.step())));
      p.addcdiv_(s.exp_avg(), s.exp_inf(), -clr);
    });
  });
}

}  // namespace acc

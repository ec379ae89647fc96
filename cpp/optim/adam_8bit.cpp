#include "optim/adam_8bit.h"

#include <ATen/ATen.h>

#include <cmath>

#include "optim/rule_helpers.h"
#include "tensor/blockwise_8bit.h"

namespace acc {
namespace {

// Optimizer2State.init_state: zero moments, 8-bit where the parameter is large enough.
std::unique_ptr<Adam8bitParamState> fresh_state(const at::Tensor& p, const Adam8bitOptions& o) {
  auto state = std::make_unique<Adam8bitParamState>();
  if (!has_8bit_moments(p.numel(), o.min_8bit_size())) {
    state->state1(at::zeros_like(p, p.options().dtype(at::kFloat), at::MemoryFormat::Contiguous));
    state->state2(at::zeros_like(p, p.options().dtype(at::kFloat), at::MemoryFormat::Contiguous));
    return state;
  }
  const int64_t blocks = (p.numel() + kBlockwiseBlock - 1) / kBlockwiseBlock;
  state->state1(at::zeros_like(p, p.options().dtype(at::kByte), at::MemoryFormat::Contiguous));
  state->state2(at::zeros_like(p, p.options().dtype(at::kByte), at::MemoryFormat::Contiguous));
  state->qmap1(dynamic_code_tensor(/*is_signed=*/true, p.device()));
  state->qmap2(dynamic_code_tensor(/*is_signed=*/false, p.device()));
  state->absmax1(at::zeros({blocks}, p.options().dtype(at::kFloat)));
  state->absmax2(at::zeros({blocks}, p.options().dtype(at::kFloat)));
  return state;
}

// _optimizer_update_32bit_cpu, "adam".
void step_32bit(at::Tensor& p32, const at::Tensor& g, Adam8bitParamState& s, const Adam8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  at::Tensor m = s.state1(), v = s.state2();
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(s.step()));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(s.step())));
  const double step_size = -lr * correction2 / correction1;
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  const at::Tensor update = m / (v.sqrt() + o.eps() * correction2);
  p32.add_(update, step_size);
}

// _optimizer_update_8bit_blockwise_cpu, "adam": the moments dequantised, stepped and quantised again.
void step_8bit(at::Tensor& p32, const at::Tensor& g, Adam8bitParamState& s, const Adam8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  at::Tensor m = dequantize_blockwise(s.state1(), s.absmax1(), s.qmap1());
  at::Tensor v = dequantize_blockwise(s.state2(), s.absmax2(), s.qmap2());
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(s.step()));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(s.step())));
  const at::Tensor denom = (v.sqrt() / correction2).add_(o.eps());
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  p32.addcdiv_(m, denom, -lr / correction1);
  auto [codes1, max1] = quantize_blockwise(m, /*is_signed=*/true);
  auto [codes2, max2] = quantize_blockwise(v, /*is_signed=*/false);
  s.state1().copy_(codes1);
  s.absmax1().copy_(max1);
  s.state2().copy_(codes2);
  s.absmax2().copy_(max2);
}

}  // namespace

Adam8bit::Adam8bit(std::vector<torch::optim::OptimizerParamGroup> groups, const Adam8bitOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<Adam8bitOptions>(defaults)) {}

at::Tensor Adam8bit::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<Adam8bitOptions>(
        *this, "Adam8bit", [&](at::Tensor& p, const at::Tensor& grad, const Adam8bitOptions& o) {
          auto& state = state_of<Adam8bitParamState>(*this, p, [&] { return fresh_state(p, o); });
          state.step(state.step() + 1);
          const at::Tensor g = grad.to(at::kFloat).contiguous().view(p.sizes());
          at::Tensor p32 = p.to(at::kFloat);  // p itself where it is float32, as p.data.float()
          if (state.qmap1().defined())
            step_8bit(p32, g, state, o);
          else
            step_32bit(p32, g, state, o);
          if (!p32.is_same(p)) p.copy_(p32);
        });
  });
}

}  // namespace acc

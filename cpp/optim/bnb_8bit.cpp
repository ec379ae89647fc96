#include "optim/bnb_8bit.h"

#include <ATen/ATen.h>

#include <cmath>

#include "optim/rule_helpers.h"
#include "tensor/blockwise_8bit.h"

namespace acc {
namespace {

// init_state: zero moments, 8-bit where the parameter is large enough; Adam keeps two.
std::unique_ptr<Bnb8bitParamState> fresh_state(Bnb8bitRule rule, const at::Tensor& p, const Bnb8bitOptions& o) {
  auto state = std::make_unique<Bnb8bitParamState>();
  const bool two = rule == Bnb8bitRule::Adam;
  if (!has_8bit_moments(p.numel(), o.min_8bit_size())) {
    state->state1(at::zeros_like(p, p.options().dtype(at::kFloat), at::MemoryFormat::Contiguous));
    if (two) state->state2(at::zeros_like(p, p.options().dtype(at::kFloat), at::MemoryFormat::Contiguous));
    return state;
  }
  const int64_t blocks = (p.numel() + kBlockwiseBlock - 1) / kBlockwiseBlock;
  state->state1(at::zeros_like(p, p.options().dtype(at::kByte), at::MemoryFormat::Contiguous));
  state->qmap1(dynamic_code_tensor(/*is_signed=*/true, p.device()));
  state->absmax1(at::zeros({blocks}, p.options().dtype(at::kFloat)));
  if (two) {
    state->state2(at::zeros_like(p, p.options().dtype(at::kByte), at::MemoryFormat::Contiguous));
    state->qmap2(dynamic_code_tensor(/*is_signed=*/false, p.device()));
    state->absmax2(at::zeros({blocks}, p.options().dtype(at::kFloat)));
  }
  return state;
}

// _optimizer_update_32bit_cpu, "adam".
void adam_32bit(at::Tensor& p32, const at::Tensor& g, Bnb8bitParamState& s, const Bnb8bitOptions& o) {
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

// _optimizer_update_8bit_blockwise_cpu, "adam", on the dequantised moments.
void adam_8bit(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, at::Tensor& v, int64_t step,
               const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  const at::Tensor denom = (v.sqrt() / correction2).add_(o.eps());
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  p32.addcdiv_(m, denom, -lr / correction1);
}

// "lion": the 32-bit rule interpolates with add's alpha, the 8-bit one by two products.
void lion(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, bool eight_bit, const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  const at::Tensor direction =
      eight_bit ? at::sign(m.mul(beta1) + g.mul(1.0 - beta1)) : m.mul(beta1).add(g, 1.0 - beta1).sign();
  p32.add_(direction, -lr);
  m.mul_(beta2).add_(g, 1.0 - beta2);
}

// The moments dequantised, stepped and quantised again into the state.
void step_8bit(Bnb8bitRule rule, at::Tensor& p32, const at::Tensor& g, Bnb8bitParamState& s, const Bnb8bitOptions& o) {
  at::Tensor m = dequantize_blockwise(s.state1(), s.absmax1(), s.qmap1());
  if (rule == Bnb8bitRule::Lion) {
    lion(p32, g, m, /*eight_bit=*/true, o);
  } else {
    at::Tensor v = dequantize_blockwise(s.state2(), s.absmax2(), s.qmap2());
    adam_8bit(p32, g, m, v, s.step(), o);
    auto [codes, maxima] = quantize_blockwise(v, /*is_signed=*/false);
    s.state2().copy_(codes);
    s.absmax2().copy_(maxima);
  }
  auto [codes, maxima] = quantize_blockwise(m, /*is_signed=*/true);
  s.state1().copy_(codes);
  s.absmax1().copy_(maxima);
}

}  // namespace

Bnb8bitOptimizer::Bnb8bitOptimizer(Bnb8bitRule rule, std::vector<torch::optim::OptimizerParamGroup> groups,
                                   const Bnb8bitOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<Bnb8bitOptions>(defaults)), rule_(rule) {}

at::Tensor Bnb8bitOptimizer::step(LossClosure closure) {
  return with_closure(closure, [&] {
    for_each_with_grad<Bnb8bitOptions>(
        *this, "bitsandbytes' 8-bit optimizer", [&](at::Tensor& p, const at::Tensor& grad, const Bnb8bitOptions& o) {
          auto& state = state_of<Bnb8bitParamState>(*this, p, [&] { return fresh_state(rule_, p, o); });
          state.step(state.step() + 1);
          const at::Tensor g = grad.to(at::kFloat).contiguous().view(p.sizes());
          at::Tensor p32 = p.to(at::kFloat);  // p itself where it is float32, as p.data.float()
          if (state.qmap1().defined()) {
            step_8bit(rule_, p32, g, state, o);
          } else if (rule_ == Bnb8bitRule::Lion) {
            at::Tensor m = state.state1();
            lion(p32, g, m, /*eight_bit=*/false, o);
          } else {
            adam_32bit(p32, g, state, o);
          }
          if (!p32.is_same(p)) p.copy_(p32);
        });
  });
}

}  // namespace acc

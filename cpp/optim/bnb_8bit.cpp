#include "optim/bnb_8bit.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/rule_helpers.h"
#include "tensor/blockwise_8bit.h"

namespace acc {
namespace {

// init_state: zero moments, 8-bit where the parameter is large enough, and the dynamic codes.
std::unique_ptr<Bnb8bitParamState> fresh_state(Bnb8bitRule rule, const at::Tensor& p, const Bnb8bitOptions& o) {
  auto state = std::make_unique<Bnb8bitParamState>();
  const bool eight_bit = has_8bit_moments(p.numel(), o.min_8bit_size());
  const auto shapes = state_field_shapes(rule, p.sizes(), eight_bit);
  const auto zeros = [&](const char* field, at::ScalarType dtype) {
    return at::zeros(shapes.at(field), p.options().dtype(dtype));
  };
  const at::ScalarType moments = eight_bit ? at::kByte : at::kFloat;
  state->state1(zeros("state1", moments));
  if (shapes.count("state2")) state->state2(zeros("state2", moments));
  if (!eight_bit) return state;
  state->qmap1(dynamic_code_tensor(/*is_signed=*/true, p.device())).absmax1(zeros("absmax1", at::kFloat));
  if (shapes.count("qmap2"))
    state->qmap2(dynamic_code_tensor(/*is_signed=*/false, p.device())).absmax2(zeros("absmax2", at::kFloat));
  return state;
}

// Adam: the 32-bit rule folds eps into the step size, the 8-bit one divides by the corrections.
void adam(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, at::Tensor& v, int64_t step, bool eight_bit,
          const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  if (eight_bit) {
    const at::Tensor denom = (v.sqrt() / correction2).add_(o.eps());
    if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
    p32.addcdiv_(m, denom, -lr / correction1);
    return;
  }
  const double step_size = -lr * correction2 / correction1;
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  const at::Tensor update = m / (v.sqrt() + o.eps() * correction2);
  p32.add_(update, step_size);
}

// AdEMAMix: both rules compute alike; m holds m1 and m2 as its two halves.
void ademamix(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, at::Tensor& v, int64_t step,
              const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  const double beta3 = ademamix_beta3(o, step), alpha = ademamix_alpha(o, step);
  at::Tensor m1 = m[0], m2 = m[1];
  m1.mul_(beta1).add_(g, 1.0 - beta1);
  m2.mul_(beta3).add_(g, 1.0 - beta3);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  const at::Tensor mixed = m1 / correction1 + m2 * alpha;
  const at::Tensor adaptive = v.sqrt() / correction2 + o.eps();
  p32.add_(mixed / adaptive, -lr);
}

// Lion: the 32-bit rule interpolates with add's alpha, the 8-bit one by two products.
void lion(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, bool eight_bit, const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
  if (o.weight_decay() > 0) p32.mul_(1.0 - lr * o.weight_decay());
  const at::Tensor direction =
      eight_bit ? at::sign(m.mul(beta1) + g.mul(1.0 - beta1)) : m.mul(beta1).add(g, 1.0 - beta1).sign();
  p32.add_(direction, -lr);
  m.mul_(beta2).add_(g, 1.0 - beta2);
}

// The gradient with L2 weight decay, as the one-state rules but Lion take it: the 8-bit rules add
// weight_decay * p even when it is 0, the 32-bit rules only above 0 (the two differ for -0.0).
at::Tensor decayed_gradient(const at::Tensor& g, const at::Tensor& p32, bool eight_bit, const Bnb8bitOptions& o) {
  return eight_bit || o.weight_decay() > 0 ? g.add(p32, o.weight_decay()) : g;
}

void momentum(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, int64_t step, bool eight_bit,
              const Bnb8bitOptions& o) {
  const at::Tensor gw = decayed_gradient(g, p32, eight_bit, o);
  if (step == 1)
    m.copy_(gw);
  else
    m.mul_(std::get<0>(o.betas())).add_(gw);
  p32.add_(m, -o.lr());
}

// RMSprop and Adagrad: the 8-bit rules divide in one addcdiv, the 32-bit ones apart.
void scaled_by_root(at::Tensor& p32, const at::Tensor& gw, const at::Tensor& m, bool eight_bit,
                    const Bnb8bitOptions& o) {
  if (eight_bit)
    p32.addcdiv_(gw, m.sqrt().add_(o.eps()), -o.lr());
  else
    p32.add_(gw / (m.sqrt() + o.eps()), -o.lr());
}

void rmsprop(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, bool eight_bit, const Bnb8bitOptions& o) {
  const double beta1 = std::get<0>(o.betas());
  const at::Tensor gw = decayed_gradient(g, p32, eight_bit, o);
  m.mul_(beta1).addcmul_(gw, gw, 1.0 - beta1);
  scaled_by_root(p32, gw, m, eight_bit, o);
}

void adagrad(at::Tensor& p32, const at::Tensor& g, at::Tensor& m, bool eight_bit, const Bnb8bitOptions& o) {
  const at::Tensor gw = decayed_gradient(g, p32, eight_bit, o);
  m.addcmul_(gw, gw, 1.0);
  scaled_by_root(p32, gw, m, eight_bit, o);
}

// One rule on float32 moments (m: state1's, v: state2's where the rule keeps one).
void apply_rule(Bnb8bitRule rule, at::Tensor& p32, const at::Tensor& g, at::Tensor& m, at::Tensor& v, int64_t step,
                bool eight_bit, const Bnb8bitOptions& o) {
  switch (rule) {
    case Bnb8bitRule::Adam:
      return adam(p32, g, m, v, step, eight_bit, o);
    case Bnb8bitRule::AdEMAMix:
      return ademamix(p32, g, m, v, step, o);
    case Bnb8bitRule::Lion:
      return lion(p32, g, m, eight_bit, o);
    case Bnb8bitRule::Momentum:
      return momentum(p32, g, m, step, eight_bit, o);
    case Bnb8bitRule::RMSprop:
      return rmsprop(p32, g, m, eight_bit, o);
    case Bnb8bitRule::Adagrad:
      return adagrad(p32, g, m, eight_bit, o);
  }
}

// state1 dequantised: AdEMAMix's halves each with their own row of maxima.
at::Tensor dequantized_first_state(Bnb8bitRule rule, const Bnb8bitParamState& s) {
  if (first_state_count(rule) == 1) return dequantize_blockwise(s.state1(), s.absmax1(), s.qmap1());
  return at::stack({dequantize_blockwise(s.state1()[0], s.absmax1()[0], s.qmap1()),
                    dequantize_blockwise(s.state1()[1], s.absmax1()[1], s.qmap1())});
}

void store_quantized(const at::Tensor& values, bool is_signed, at::Tensor codes_out, at::Tensor maxima_out) {
  auto [codes, maxima] = quantize_blockwise(values, is_signed);
  codes_out.copy_(codes.view(codes_out.sizes()));
  maxima_out.copy_(maxima);
}

// The moments dequantised, stepped and quantised again into the state.
void step_8bit(Bnb8bitRule rule, at::Tensor& p32, const at::Tensor& g, Bnb8bitParamState& s, const Bnb8bitOptions& o) {
  at::Tensor m = dequantized_first_state(rule, s);
  at::Tensor v = has_second_state(rule) ? dequantize_blockwise(s.state2(), s.absmax2(), s.qmap2()) : at::Tensor();
  apply_rule(rule, p32, g, m, v, s.step(), /*eight_bit=*/true, o);
  if (first_state_count(rule) == 2) {
    store_quantized(m[0], /*is_signed=*/true, s.state1()[0], s.absmax1()[0]);
    store_quantized(m[1], /*is_signed=*/true, s.state1()[1], s.absmax1()[1]);
  } else {
    store_quantized(m, /*is_signed=*/true, s.state1(), s.absmax1());
  }
  if (v.defined()) store_quantized(v, /*is_signed=*/false, s.state2(), s.absmax2());
}

}  // namespace

const char* first_beta_key(Bnb8bitRule rule) {
  if (rule == Bnb8bitRule::Momentum) return "momentum";
  if (rule == Bnb8bitRule::RMSprop) return "alpha";
  return rule == Bnb8bitRule::Adagrad ? nullptr : "beta1";
}

std::map<std::string, std::vector<int64_t>> state_field_shapes(Bnb8bitRule rule, at::IntArrayRef shape,
                                                               bool eight_bit) {
  const bool halves = first_state_count(rule) == 2, two = has_second_state(rule);
  std::vector<int64_t> first = shape.vec();
  if (halves) first.insert(first.begin(), 2);
  std::map<std::string, std::vector<int64_t>> shapes = {{"state1", first}};
  if (two) shapes["state2"] = shape.vec();
  if (!eight_bit) return shapes;
  const int64_t blocks = blockwise_blocks(c10::multiply_integers(shape));
  shapes["qmap1"] = {256};
  shapes["absmax1"] = halves ? std::vector<int64_t>{2, blocks} : std::vector<int64_t>{blocks};
  if (two) {
    shapes["qmap2"] = {256};
    shapes["absmax2"] = {blocks};
  }
  return shapes;
}

double ademamix_alpha(const Bnb8bitOptions& o, int64_t step) {
  if (o.t_alpha() <= 0) return o.alpha();
  return std::min(static_cast<double>(step) * o.alpha() / static_cast<double>(o.t_alpha()), o.alpha());
}

double ademamix_beta3(const Bnb8bitOptions& o, int64_t step) {
  if (o.t_beta3() <= 0) return o.beta3();
  const double ln_beta1 = std::log(std::get<0>(o.betas())), ln_beta3 = std::log(o.beta3());
  const double scale = static_cast<double>(step) / static_cast<double>(o.t_beta3());
  return std::min(std::exp((ln_beta1 * ln_beta3) / (((1 - scale) * ln_beta3) + (scale * ln_beta1))), o.beta3());
}

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
          } else {
            at::Tensor m = state.state1(), v = state.state2();
            apply_rule(rule_, p32, g, m, v, state.step(), /*eight_bit=*/false, o);
          }
          if (!p32.is_same(p)) p.copy_(p32);
        });
  });
}

}  // namespace acc

// bitsandbytes' 8-bit optimizers, as its CPU backend steps them (_optimizer_update_8bit_blockwise_cpu
// and _optimizer_update_32bit_cpu): Adam8bit and AdamW8bit (Optimizer2State "adam"), AdEMAMix8bit
// ("ademamix"), and the one-state Lion8bit ("lion"), SGD8bit ("momentum"), RMSprop8bit
// ("rmsprop") and Adagrad8bit ("adagrad"). The moments of a parameter with at least min_8bit_size
// elements are kept as blockwise 8-bit codes (tensor/blockwise_8bit.h: state1 on the signed
// dynamic code, Adam's and AdEMAMix's second moment on the unsigned one; blocks of 256, float32
// maxima), dequantised for each step and quantised again after it; a smaller parameter keeps
// float32 moments and takes bitsandbytes' 32-bit rule. AdEMAMix's state1 holds its two first
// moments, (2, *shape), each half quantised with its own row of maxima.
//
// Weight decay is decoupled (p *= 1 - lr * weight_decay) for Adam, AdEMAMix and Lion, and added to
// the gradient (g + weight_decay * p) for the others; their 8-bit rules add it even when it is 0.
//   Adam, 8-bit:  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//                 p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//   Adam, 32-bit: the same moments; p += -lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps sqrt(1 - beta2^t))
//   AdEMAMix:     m1 as Adam's m, m2 = beta3 m2 + (1 - beta3) g, v as Adam's;
//                 p -= lr (m1 / (1 - beta1^t) + alpha m2) / (sqrt(v) / sqrt(1 - beta2^t) + eps), with
//                 alpha and beta3 warmed up over t_alpha and t_beta3 steps where those are set
//   Lion:         p -= lr * sign(beta1 m + (1 - beta1) g);  m = beta2 m + (1 - beta2) g
//   Momentum:     m = g at the first step, beta1 m + g after;  p -= lr m
//   RMSprop:      m = beta1 m + (1 - beta1) g^2;  p -= lr g / (sqrt(m) + eps)
//   Adagrad:      m += g^2;  p -= lr g / (sqrt(m) + eps)
#pragma once

#include <torch/optim/optimizer.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace acc {

enum class Bnb8bitRule { Adam, AdEMAMix, Lion, Momentum, RMSprop, Adagrad };

// Whether the rule keeps a second moment (state2).
inline bool has_second_state(Bnb8bitRule rule) { return rule == Bnb8bitRule::Adam || rule == Bnb8bitRule::AdEMAMix; }
// How many moments state1 holds (AdEMAMix's two first moments).
inline int64_t first_state_count(Bnb8bitRule rule) { return rule == Bnb8bitRule::AdEMAMix ? 2 : 1; }
// Our option key for bitsandbytes' betas[0]: SGD8bit's momentum, RMSprop8bit's alpha, beta1
// elsewhere; none for Adagrad8bit, whose betas are (0, 0).
const char* first_beta_key(Bnb8bitRule rule);
// Whether the rule reads betas[1] (beta2), and eps (Lion and SGD8bit have none).
inline bool takes_second_beta(Bnb8bitRule rule) {
  return rule == Bnb8bitRule::Adam || rule == Bnb8bitRule::AdEMAMix || rule == Bnb8bitRule::Lion;
}
inline bool takes_eps(Bnb8bitRule rule) { return rule != Bnb8bitRule::Lion && rule != Bnb8bitRule::Momentum; }
// The rule of the bitsandbytes optimizer named `algorithm`; none for any other algorithm (defined
// with the algorithms, optim/algorithm_bnb_8bit.cpp).
std::optional<Bnb8bitRule> bitsandbytes_rule(const std::string& algorithm);
// Every field of a parameter's state but "step", with its shape, for a parameter of `shape`:
// state1 ((2, *shape) for AdEMAMix), state2 where the rule keeps one, and with 8-bit moments qmap1
// and qmap2 (256 codes) and absmax1 and absmax2 (a maximum per block; AdEMAMix's absmax1 a row per
// first moment).
std::map<std::string, std::vector<int64_t>> state_field_shapes(Bnb8bitRule rule, at::IntArrayRef shape, bool eight_bit);

// bitsandbytes' group settings, in its names: betas (beta1 is SGD's momentum and RMSprop's alpha),
// AdEMAMix's beta3, alpha, t_alpha and t_beta3 (0: no warm-up, as bitsandbytes' None).
struct Bnb8bitOptions : public torch::optim::OptimizerCloneableOptions<Bnb8bitOptions> {
  explicit Bnb8bitOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, beta3) = 0;
  TORCH_ARG(double, alpha) = 0;
  TORCH_ARG(int64_t, t_alpha) = 0;
  TORCH_ARG(int64_t, t_beta3) = 0;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(int64_t, min_8bit_size) = 4096;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

// The fields of bitsandbytes' state, by its names: step, state1 (and the two-state rules' state2):
// uint8 codes in the parameter's shape ((2, *shape) for AdEMAMix's state1), or float32 moments; for
// 8-bit moments qmap1 (and qmap2), the codes (256 float32), and absmax1 (and absmax2), float32 per
// block of 256 ((2, blocks) for AdEMAMix's absmax1).
struct Bnb8bitParamState : public torch::optim::OptimizerCloneableParamState<Bnb8bitParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, state1);
  TORCH_ARG(at::Tensor, state2);
  TORCH_ARG(at::Tensor, qmap1);
  TORCH_ARG(at::Tensor, qmap2);
  TORCH_ARG(at::Tensor, absmax1);
  TORCH_ARG(at::Tensor, absmax2);
};

class Bnb8bitOptimizer final : public torch::optim::Optimizer {
 public:
  Bnb8bitOptimizer(Bnb8bitRule rule, std::vector<torch::optim::OptimizerParamGroup> groups,
                   const Bnb8bitOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  Bnb8bitRule rule_;
};

// Whether a parameter of `numel` elements keeps 8-bit moments under `min_8bit_size`.
inline bool has_8bit_moments(int64_t numel, int64_t min_8bit_size) { return numel >= min_8bit_size; }

// AdEMAMix's alpha and beta3 at `step` (1-based), warmed up over t_alpha and t_beta3 steps where
// those are above 0, as AdEMAMix.update_step computes them.
double ademamix_alpha(const Bnb8bitOptions& o, int64_t step);
double ademamix_beta3(const Bnb8bitOptions& o, int64_t step);

}  // namespace acc

// bitsandbytes' 8-bit optimizers, as its 0.50 release steps them on the CPU: Adam8bit and
// AdamW8bit (Optimizer2State "adam") and Lion8bit (Optimizer1State "lion"). The moments of a
// parameter with at least min_8bit_size elements are kept as blockwise 8-bit codes
// (tensor/blockwise_8bit.h: Adam's first moment and Lion's momentum on the signed dynamic code,
// Adam's second moment on the unsigned one; blocks of 256, float32 maxima), dequantised for each
// step and quantised again after it; a smaller parameter keeps float32 moments and takes
// bitsandbytes' 32-bit rule. Weight decay is decoupled (p *= 1 - lr * weight_decay) in every rule,
// as bitsandbytes applies it for Adam8bit too.
//
//   Adam, 8-bit:  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//                 p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//   Adam, 32-bit: the same moments; p += -lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps sqrt(1 - beta2^t))
//   Lion:         p -= lr * sign(beta1 m + (1 - beta1) g);  m = beta2 m + (1 - beta2) g
#pragma once

#include <torch/optim/optimizer.h>

#include <tuple>

namespace acc {

enum class Bnb8bitRule { Adam, Lion };

struct Bnb8bitOptions : public torch::optim::OptimizerCloneableOptions<Bnb8bitOptions> {
  explicit Bnb8bitOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;  // Adam's
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(int64_t, min_8bit_size) = 4096;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

// The fields of bitsandbytes' state, by its names: step, state1 (and Adam's state2): uint8 codes in
// the parameter's shape, or float32 moments; for 8-bit moments qmap1 (and qmap2), the codes (256
// float32), and absmax1 (and absmax2), float32 per block of 256.
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

}  // namespace acc

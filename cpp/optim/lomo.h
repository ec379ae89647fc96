// LOMO and AdaLomo (the lomo_optim package 0.1: Lv et al. 2023, "Full Parameter Fine-tuning for
// Large Language Models with Limited Resources", and "AdaLomo: Low-memory Optimization with
// Adaptive Learning Rate"), op for op as lomo_optim's Lomo and AdaLomo update outside DeepSpeed.
//
// They fuse the update into backward: each parameter is updated as soon as the next gradient of the
// backward pass is produced (by then its own gradient is complete), and its gradient is dropped at
// once, so that no full set of gradients ever exists: a model needs its parameters, one or two
// gradients in flight and (AdaLomo) factored second moments. The price: no gradient accumulation
// across backward passes, and clipping by the global norm needs a second backward (grad_norm) that
// measures the gradients before the one that applies them.
//
//   Lomo:    p <- p * (1 - lr * weight_decay) - lr * g
//   AdaLomo: Adafactor's factored second moment of g^2 + eps1 (beta2_t = 1 - t^decay_rate, t the
//            backward count), u = g / sqrt(v), u / max(1, RMS(u) / clip_threshold), a step size
//            lr * max(eps2, RMS(p)); the loss is multiplied by loss_scale and the gradients divided
//            by it again.
// g is the gradient in float32, clamped to [-clip_grad_value, clip_grad_value] and multiplied by
// the coefficient of the last grad_norm where those are set; parameters of other dtypes are updated
// in float32 and rounded back. The learning rate is the one the backward is given (lomo_optim's
// fused_backward(loss, lr)); the group's "lr" is what a scheduler moves, as in lomo_optim.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace acc {

struct LomoOptions : public torch::optim::OptimizerCloneableOptions<LomoOptions> {
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(std::optional<double>, clip_grad_norm);   // > 0: needs grad_norm before each backward
  TORCH_ARG(std::optional<double>, clip_grad_value);  // > 0
  TORCH_ARG(double, weight_decay) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct AdaLomoOptions : public torch::optim::OptimizerCloneableOptions<AdaLomoOptions> {
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(double, loss_scale) = 1024;  // 0: none
  using eps_t = std::tuple<double, double>;
  TORCH_ARG(eps_t, eps) = std::make_tuple(1e-30, 1e-3);  // added to g^2; least parameter scale
  TORCH_ARG(double, clip_threshold) = 1.0;
  TORCH_ARG(double, decay_rate) = -0.8;
  TORCH_ARG(std::optional<double>, clip_grad_norm);
  TORCH_ARG(std::optional<double>, clip_grad_value);
  TORCH_ARG(double, weight_decay) = 0;
  // The fused backward passes so far (lomo_optim's step_num): the t of beta2_t. Saved with the
  // group, so that a resumed run decays its moments as an uninterrupted one.
  TORCH_ARG(int64_t, step_num) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

// AdaLomo's second moment: the row and column means of g^2 + eps1 for a parameter of 2 or more
// dimensions (lomo_optim's shapes for a matrix; the last dimension is the row), the whole average
// otherwise. Float32 whatever the parameter's dtype, as lomo_optim keeps it.
struct AdaLomoParamState : public torch::optim::OptimizerCloneableParamState<AdaLomoParamState> {
  TORCH_ARG(at::Tensor, exp_avg_sq_row);
  TORCH_ARG(at::Tensor, exp_avg_sq_col);
  TORCH_ARG(at::Tensor, exp_avg_sq);
};

// Replaces a gradient by its average over the processes of data-parallel training (index: the
// parameter's position in the optimizer's group); empty on one process.
using GradientAverager = std::function<void(at::Tensor& grad, size_t index)>;

// What Lomo and AdaLomo share: the backward passes and the per-gradient pipeline.
class FusedBackwardOptimizer : public torch::optim::Optimizer {
 public:
  // There is no step of its own: the parameters change inside fused_backward.
  at::Tensor step(LossClosure closure = nullptr) override;

  // lomo_optim's fused_backward(loss, lr): back-propagates `loss` (times loss_scale for AdaLomo) and
  // updates every parameter whose gradient it produces with rate `lr`, dropping the gradient.
  void fused_backward(const at::Tensor& loss, double lr, const GradientAverager& average);
  // lomo_optim's grad_norm(loss): a backward that keeps the graph and only measures: the total
  // 2-norm of the (averaged) gradients, whose clip_grad_norm / (norm + 1e-6), at most 1, scales
  // the gradients of every later fused_backward until the next grad_norm. Returns the norm.
  double grad_norm(const at::Tensor& loss, const GradientAverager& average);

  // The options' clipping bounds (each group's are alike: these optimizers have one group).
  virtual std::optional<double> clip_grad_norm() const = 0;
  virtual std::optional<double> clip_grad_value() const = 0;

 protected:
  using torch::optim::Optimizer::Optimizer;

  // The loss that backward starts from, and the factor each gradient is divided by.
  virtual at::Tensor scaled_loss(const at::Tensor& loss) const { return loss; }
  virtual double loss_scale() const { return 0; }
  // Before a fused backward's first update (AdaLomo counts them).
  virtual void begin_fused_backward() {}
  // Updates `param` from its float32 gradient `grad` (clipped already), at `lr`.
  virtual void update(at::Tensor& param, at::Tensor& grad, double lr) = 0;

 private:
  // Every parameter whose gradient is complete: each is taken from the parameter (averaged across
  // processes first), then measured or applied. Run from the gradient hooks and after backward.
  void consume_gradients();
  // loss.backward() with consume_gradients hooked to each trainable parameter's gradient.
  void backward_with_hooks(const at::Tensor& loss, bool retain_graph, const GradientAverager& average);

  bool measuring_ = false;         // inside grad_norm: gradients are measured, not applied
  std::vector<at::Tensor> norms_;  // their norms, in the order backward produced them
  at::Tensor clip_coef_;           // the last grad_norm's coefficient (undefined before one)
  double lr_ = 0;
  const GradientAverager* average_ = nullptr;
};

class Lomo final : public FusedBackwardOptimizer {
 public:
  Lomo(std::vector<torch::optim::OptimizerParamGroup> groups, const LomoOptions& defaults);
  std::optional<double> clip_grad_norm() const override { return options().clip_grad_norm(); }
  std::optional<double> clip_grad_value() const override { return options().clip_grad_value(); }

 private:
  const LomoOptions& options() const;
  // An fp16 loss is refused: lomo_optim scales it with a DynamicLossScaler of its own, not built.
  at::Tensor scaled_loss(const at::Tensor& loss) const override;
  void update(at::Tensor& param, at::Tensor& grad, double lr) override;
};

class AdaLomo final : public FusedBackwardOptimizer {
 public:
  AdaLomo(std::vector<torch::optim::OptimizerParamGroup> groups, const AdaLomoOptions& defaults);
  std::optional<double> clip_grad_norm() const override { return options().clip_grad_norm(); }
  std::optional<double> clip_grad_value() const override { return options().clip_grad_value(); }

 private:
  const AdaLomoOptions& options() const;
  AdaLomoOptions& options();
  at::Tensor scaled_loss(const at::Tensor& loss) const override;
  double loss_scale() const override { return options().loss_scale(); }
  void begin_fused_backward() override { options().step_num(options().step_num() + 1); }
  void update(at::Tensor& param, at::Tensor& grad, double lr) override;
};

}  // namespace acc

#include "optim/lomo.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

#include "common/compat.h"
#include "common/error.h"

namespace acc {
namespace {

// torch.norm(t, 2.0): the 2-norm of all elements, in t's dtype.
at::Tensor norm2(const at::Tensor& t) { return at::linalg_vector_norm(t, 2); }

}  // namespace

at::Tensor FusedBackwardOptimizer::step(LossClosure) {
  fail(Status::InvalidArgument,
       "a LOMO optimizer has no step of its own: it updates the parameters inside backward (acc_lomo_backward, or "
       "acc_backward_lr on a prepared one, where acc_optimizer_step does nothing, as Accelerate's)");
}

void FusedBackwardOptimizer::fused_backward(const at::Tensor& loss, double lr, const GradientAverager& average) {
  const auto norm = clip_grad_norm();
  require(!(norm && *norm > 0 && !clip_coef_.defined()),
          "clip_grad_norm is set, but no grad_norm pass came first: measure the gradients (acc_lomo_grad_norm) on the "
          "loss before its backward");
  const at::Tensor scaled = scaled_loss(loss);
  lr_ = lr;
  begin_fused_backward();
  backward_with_hooks(scaled, /*retain_graph=*/false, average);
}

double FusedBackwardOptimizer::grad_norm(const at::Tensor& loss, const GradientAverager& average) {
  const auto max_norm = clip_grad_norm();
  require(max_norm.has_value(),
          "grad_norm measures the gradients for clip_grad_norm, which this optimizer does not "
          "have (set it when creating the optimizer)");
  const at::Tensor scaled = scaled_loss(loss);
  measuring_ = true;
  norms_.clear();
  try {
    backward_with_hooks(scaled, /*retain_graph=*/true, average);
  } catch (...) {
    measuring_ = false;
    norms_.clear();
    throw;
  }
  measuring_ = false;
  at::NoGradGuard no_grad;
  const at::Tensor total = norms_.empty() ? at::zeros({}, at::kFloat) : norm2(at::stack(norms_));
  norms_.clear();
  // lomo_optim's float(clip_grad_norm) / (total + 1e-6) is Tensor.__rtruediv__: a reciprocal, then a
  // product; clamped to at most 1.
  clip_coef_ = at::reciprocal(total + 1e-6).mul(*max_norm).clamp_max(1.0);
  return total.item<double>();
}

void FusedBackwardOptimizer::backward_with_hooks(const at::Tensor& loss, bool retain_graph,
                                                 const GradientAverager& average) {
  // A hook runs just before its parameter's gradient is accumulated, so it finds the gradients
  // accumulated before it complete: those it consumes. The hooks live for this backward only, so an
  // ordinary backward through the model leaves its gradients alone.
  std::vector<std::pair<at::Tensor, unsigned>> hooks;
  const auto remove_hooks = [&] {
    for (auto& [param, hook] : hooks) param.remove_hook(hook);
    average_ = nullptr;
  };
  average_ = &average;
  try {
    for (auto& group : param_groups())
      for (auto& param : group.params())
        if (param.requires_grad())
          hooks.emplace_back(param, param.register_hook([this](const at::Tensor&) { consume_gradients(); }));
    loss.backward({}, retain_graph);
    consume_gradients();  // the last gradients, complete only once backward has ended
  } catch (...) {
    remove_hooks();
    throw;
  }
  remove_hooks();
}

void FusedBackwardOptimizer::consume_gradients() {
  at::NoGradGuard no_grad;
  size_t index = 0;
  for (auto& group : param_groups())
    for (auto& param : group.params()) {
      const size_t i = index++;
      if (!param.requires_grad() || !param.grad().defined()) continue;
      at::Tensor grad = param.grad();
      param.mutable_grad().reset();
      if (average_ && *average_) (*average_)(grad, i);
      at::Tensor g = grad.to(at::kFloat);  // the gradient itself where it is float32 already
      if (loss_scale() != 0) g.div_(loss_scale());
      if (measuring_) {
        norms_.push_back(norm2(g));
        continue;
      }
      if (const auto value = clip_grad_value(); value && *value > 0) g.clamp_(-*value, *value);
      if (const auto norm = clip_grad_norm(); norm && *norm > 0 && clip_coef_.defined()) g.mul_(clip_coef_);
      update(param, g, lr_);
    }
}

Lomo::Lomo(std::vector<torch::optim::OptimizerParamGroup> groups, const LomoOptions& defaults)
    : FusedBackwardOptimizer(std::move(groups), std::make_unique<LomoOptions>(defaults)) {}

const LomoOptions& Lomo::options() const { return static_cast<const LomoOptions&>(param_groups().front().options()); }

at::Tensor Lomo::scaled_loss(const at::Tensor& loss) const {
  if (loss.scalar_type() == at::kHalf)
    fail(Status::Unsupported, "LOMO with an fp16 loss: lomo_optim scales such a loss with a dynamic loss scaler of ",
         "its own, which is not built here (compute the loss in float32 or bf16)");
  return loss;
}

void Lomo::update(at::Tensor& param, at::Tensor& grad, double lr) {
  // p.data: a view of the values that autograd does not track, as lomo_optim writes them.
  at::Tensor data = param.variable_data();
  at::Tensor p32 = data.to(at::kFloat);
  const double weight_decay = options().weight_decay();
  if (weight_decay > 0) p32.mul_(1.0 - lr * weight_decay);
  p32.add_(grad, -lr);
  if (!p32.is_same(data)) data.copy_(p32);
}

AdaLomo::AdaLomo(std::vector<torch::optim::OptimizerParamGroup> groups, const AdaLomoOptions& defaults)
    : FusedBackwardOptimizer(std::move(groups), std::make_unique<AdaLomoOptions>(defaults)) {}

const AdaLomoOptions& AdaLomo::options() const {
  return static_cast<const AdaLomoOptions&>(param_groups().front().options());
}

AdaLomoOptions& AdaLomo::options() { return static_cast<AdaLomoOptions&>(param_groups().front().options()); }

at::Tensor AdaLomo::scaled_loss(const at::Tensor& loss) const {
  const double scale = options().loss_scale();
  return scale != 0 ? loss * scale : loss;
}

void AdaLomo::update(at::Tensor& param, at::Tensor& grad, double lr) {
  const AdaLomoOptions& o = options();
  auto& slot = state()[compat::optimizer_state_key(param)];
  if (!slot) {
    // lomo_optim makes them zero when it is created; the first update's beta2_t is 0, so they are
    // then what that update writes.
    auto fresh = std::make_unique<AdaLomoParamState>();
    const auto zeros = [&](std::vector<int64_t> shape) { return at::zeros(shape, param.options().dtype(at::kFloat)); };
    auto sizes = param.sizes().vec();
    if (param.dim() >= 2) {
      auto row = sizes, col = sizes;
      row.pop_back();
      col.erase(col.end() - 2);
      fresh->exp_avg_sq_row(zeros(row)).exp_avg_sq_col(zeros(col));
    } else {
      fresh->exp_avg_sq(zeros(sizes));
    }
    slot = std::move(fresh);
  }
  auto& s = static_cast<AdaLomoParamState&>(*slot);

  // lomo_optim avoids 0 to a negative power at step 0 by flipping the exponent's sign there.
  const double decay_rate = o.step_num() == 0 && o.decay_rate() < 0 ? -o.decay_rate() : o.decay_rate();
  const double beta2t = 1.0 - std::pow(static_cast<double>(o.step_num()), decay_rate);
  at::Tensor u = at::pow(grad, 2) + std::get<0>(o.eps());
  if (param.dim() >= 2) {
    s.exp_avg_sq_row().mul_(beta2t).add_(u.mean(-1), 1.0 - beta2t);
    s.exp_avg_sq_col().mul_(beta2t).add_(u.mean(-2), 1.0 - beta2t);
    const at::Tensor& row = s.exp_avg_sq_row();
    const at::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
    const at::Tensor c_factor = s.exp_avg_sq_col().unsqueeze(-2).rsqrt();
    u = at::mul(r_factor, c_factor);
    u.mul_(grad);
  } else {
    s.exp_avg_sq().mul_(beta2t).add_(u, 1.0 - beta2t);
    u = s.exp_avg_sq().rsqrt().mul_(grad);
  }
  const at::Tensor u_rms = norm2(u) / std::pow(static_cast<double>(u.numel()), 0.5);
  u.div_((u_rms / o.clip_threshold()).clamp_(1.0));

  at::Tensor data = param.variable_data();
  at::Tensor p32 = data.to(at::kFloat);
  const at::Tensor p_rms = norm2(p32) / std::sqrt(static_cast<double>(param.numel()));
  // Python's max(eps2, p_rms): the parameter's RMS, a float32 tensor, where it compares greater;
  // the step size is then a float32 tensor too, and so is the decay factor made from it.
  const double eps2 = std::get<1>(o.eps());
  const double weight_decay = o.weight_decay();
  if ((p_rms > eps2).item<bool>()) {
    const at::Tensor step_size = p_rms * lr;
    if (weight_decay > 0) p32.mul_(at::rsub(step_size * weight_decay, 1.0));
    p32.add_(u, (-step_size).item());
  } else {
    const double step_size = lr * eps2;
    if (weight_decay > 0) p32.mul_(1.0 - step_size * weight_decay);
    p32.add_(u, -step_size);
  }
  if (!p32.is_same(data)) data.copy_(p32);
}

}  // namespace acc

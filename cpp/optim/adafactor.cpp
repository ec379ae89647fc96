#include "optim/adafactor.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "common/compat.h"
#include "common/error.h"

namespace acc {
namespace {

// transformers' _rms: the 2-norm over sqrt(numel).
at::Tensor rms(const at::Tensor& t) {
  return at::linalg_vector_norm(t, 2).div(std::pow(static_cast<double>(t.numel()), 0.5));
}

bool low_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

// The step size a, and -weight_decay * a. When the parameter scale is the parameter's RMS,
// transformers multiplies a float32 0-dim tensor, so both products are rounded to float32 there.
struct StepSize {
  double lr;
  double decay_alpha;
};

StepSize step_size(const AdafactorOptions& o, int64_t step, const at::Tensor& param_rms) {
  double relative = o.lr().value_or(0.0);
  if (o.relative_step()) {
    const double min_step = o.warmup_init() ? 1e-6 * static_cast<double>(step) : 1e-2;
    relative = std::min(min_step, 1.0 / std::sqrt(static_cast<double>(step)));
  }
  const double eps2 = std::get<1>(o.eps());
  if (o.scale_parameter()) {
    const float r = param_rms.item<float>();
    if (r > static_cast<float>(eps2)) {
      const float lr = r * static_cast<float>(relative);
      return {lr, static_cast<float>(static_cast<float>(-o.weight_decay()) * lr)};
    }
    return {eps2 * relative, -o.weight_decay() * (eps2 * relative)};
  }
  return {relative, -o.weight_decay() * relative};
}

// V = R C / mean(R) from the row and column means, as 1 / sqrt(V).
at::Tensor approx_rsqrt_second_moment(const at::Tensor& row, const at::Tensor& col) {
  const at::Tensor r = row.div(row.mean(at::IntArrayRef{-1}, true)).rsqrt_().unsqueeze(-1);
  const at::Tensor c = col.unsqueeze(-2).rsqrt();
  return at::mul(r, c);
}

}  // namespace

double AdafactorOptions::get_lr() const {
  require(lr().has_value(),
          "this adafactor parameter group has no learning rate: with relative_step=true it computes a step size "
          "per parameter (create it with lr and relative_step=false to read, set or schedule one)");
  return *lr();
}

void AdafactorOptions::set_lr(const double value) {
  require(!relative_step(),
          "this adafactor parameter group computes its own step size (relative_step=true): create it with lr and "
          "relative_step=false to set or schedule a learning rate");
  lr(value);
}

Adafactor::Adafactor(std::vector<torch::optim::OptimizerParamGroup> groups, const AdafactorOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AdafactorOptions>(defaults)) {}

at::Tensor Adafactor::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdafactorOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor grad = low_precision(p.grad()) ? p.grad().to(at::kFloat) : p.grad();
      require(!grad.is_sparse(), "Adafactor does not support sparse gradients");
      const bool factored = grad.dim() >= 2;
      auto& slot = state_[compat::optimizer_state_key(p)];
      if (!slot) {
        auto fresh = std::make_unique<AdafactorParamState>();
        if (o.beta1()) fresh->exp_avg(at::zeros_like(grad));
        if (factored) {
          auto row = grad.sizes().vec(), col = grad.sizes().vec();
          row.pop_back();
          col.erase(col.end() - 2);
          fresh->exp_avg_sq_row(at::zeros(row, grad.options())).exp_avg_sq_col(at::zeros(col, grad.options()));
        } else {
          fresh->exp_avg_sq(at::zeros_like(grad));
        }
        slot = std::move(fresh);
      }
      auto& s = static_cast<AdafactorParamState&>(*slot);
      const at::Tensor p32 = low_precision(p) ? p.to(at::kFloat) : p;

      s.step(s.step() + 1);
      s.rms(rms(p32));
      const StepSize a = step_size(o, s.step(), s.rms());
      const double beta2t = 1.0 - std::pow(static_cast<double>(s.step()), o.decay_rate());

      at::Tensor update = grad.pow(2).add(std::get<0>(o.eps()));
      if (factored) {
        s.exp_avg_sq_row().mul_(beta2t).add_(update.mean(at::IntArrayRef{-1}), 1.0 - beta2t);
        s.exp_avg_sq_col().mul_(beta2t).add_(update.mean(at::IntArrayRef{-2}), 1.0 - beta2t);
        update = approx_rsqrt_second_moment(s.exp_avg_sq_row(), s.exp_avg_sq_col());
        update.mul_(grad);
      } else {
        s.exp_avg_sq().mul_(beta2t).add_(update, 1.0 - beta2t);
        update = s.exp_avg_sq().rsqrt().mul_(grad);
      }
      update.div_(rms(update).div(o.clip_threshold()).clamp_min_(1.0));
      update.mul_(a.lr);
      if (o.beta1()) {
        s.exp_avg().mul_(*o.beta1()).add_(update, 1.0 - *o.beta1());
        update = s.exp_avg();
      }
      if (o.weight_decay() != 0) p32.add_(p32, a.decay_alpha);
      p32.add_(update.neg());  // transformers' add_(-update): a NaN's sign as it comes out there
      if (!p32.is_same(p)) p.copy_(p32);
    }
  }
  return loss;
}

}  // namespace acc

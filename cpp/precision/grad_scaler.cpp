#include "precision/grad_scaler.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "common/error.h"

namespace acc {

bool GradScaler::valid(const ScaleRules& r) {
  return r.growth_factor > 1.0 && r.backoff_factor > 0 && r.backoff_factor < 1.0 && r.growth_interval >= 1;
}

GradScaler::GradScaler(GradScalerOptions options, const c10::Device& device)
    : options_(options), fused_(device.is_cuda()), hysteresis_left_(options.hysteresis) {
  require(options_.init_scale > 0 && valid(rules()),
          "GradScaler needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1");
  require(options_.hysteresis >= 1 && options_.min_scale >= 0 && std::isfinite(options_.min_scale) &&
              options_.min_scale <= options_.init_scale,
          "the loss scaler needs hysteresis >= 1 and 0 <= min_scale <= init_scale");
  const auto on = at::TensorOptions().device(device);
  scale_ = at::full({1}, options_.init_scale, on.dtype(at::kFloat));
  growth_tracker_ = at::zeros({1}, on.dtype(at::kInt));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  // A new backward: the step before it is over. Without an optimizer step there is nothing to
  // update, but what was divided before belongs to the old gradients.
  if (stepped_)
    update();
  else
    forget_step();
  return loss * scale_.to(loss.device());
}

at::Tensor& GradScaler::current(OverflowFlag& flag) {
  if (flag.step_ != step_) {
    flag.found_ = at::zeros({1}, scale_.options());
    flag.step_ = step_;
    step_flags_.push_back(flag.found_);  // the same storage: later fills count
  }
  return flag.found_;
}

void GradScaler::unscale(const std::vector<at::Tensor>& grads, OverflowFlag& flag) {
  at::Tensor& found = current(flag);
  std::vector<at::Tensor> pending;
  for (const auto& g : grads)
    if (g.defined() && unscaled_.insert(g.unsafeGetTensorImpl()).second) pending.push_back(g);
  if (pending.empty()) return;
  at::NoGradGuard no_grad;
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  if (fused_) {
    // The fused kernel takes CUDA gradients; offloaded ones (host memory) go the elementwise way.
    std::vector<at::Tensor> on_device, on_host;
    for (const auto& g : pending) (g.device() == found.device() ? on_device : on_host).push_back(g);
    if (!on_device.empty()) at::_amp_foreach_non_finite_check_and_unscale_(on_device, found, inv_scale);
    pending = std::move(on_host);
  }
  for (const auto& g : pending) {
    if (!at::isfinite(g).all().item<bool>()) found.fill_(1.0);
    g.mul_(inv_scale.to(g.device()));
  }
}

bool GradScaler::found_inf(const OverflowFlag& flag) const {
  return flag.step_ == step_ && flag.found_.item<float>() != 0.0f;
}

void GradScaler::set_found_inf(OverflowFlag& flag, bool found) { current(flag).fill_(found ? 1.0 : 0.0); }

bool GradScaler::found_inf() const {
  for (const auto& found : step_flags_)
    if (found.item<float>() != 0.0f) return true;
  return false;
}

int64_t GradScaler::growth_tracker() const { return growth_tracker_.item<int>(); }

void GradScaler::check_state(double scale, int64_t growth_tracker, int64_t hysteresis_left,
                             const std::optional<ScaleRules>& rules) const {
  const ScaleRules r = rules.value_or(this->rules());
  require(valid(r), "a GradScaler state needs growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1, got ",
          r.growth_factor, ", ", r.backoff_factor, " and ", r.growth_interval);
  require(scale > 0 && std::isfinite(scale), "a GradScaler state needs a finite scale > 0, got ", scale);
  require(growth_tracker >= 0 && growth_tracker < r.growth_interval, "a GradScaler state's growth tracker (",
          growth_tracker, ") must be in [0, growth_interval = ", r.growth_interval, ")");
  require(hysteresis_left >= 1 && hysteresis_left <= options_.hysteresis, "a loss scaler state's hysteresis (",
          hysteresis_left, ") must be in [1, hysteresis = ", options_.hysteresis, "]");
}

void GradScaler::load_state(double scale, int64_t growth_tracker, int64_t hysteresis_left,
                            const std::optional<ScaleRules>& rules) {
  check_state(scale, growth_tracker, hysteresis_left, rules);
  if (rules) {
    options_.growth_factor = rules->growth_factor;
    options_.backoff_factor = rules->backoff_factor;
    options_.growth_interval = rules->growth_interval;
  }
  scale_.fill_(scale);
  growth_tracker_.fill_(growth_tracker);
  hysteresis_left_ = hysteresis_left;
  forget_step();
}

void GradScaler::check_can_back_off(bool overflowed) const {
  if (!overflowed || options_.min_scale <= 0 || hysteresis_left_ > 1) return;
  const double scale = current_scale();
  require(scale > static_cast<float>(options_.min_scale), "the fp16 gradients overflowed with the loss scale already at ",
          "its minimum (min_loss_scale ", options_.min_scale, "): the scale cannot back off further, and the run ",
          "ends here as under DeepSpeed (lower min_loss_scale, or train in bf16)");
}

void GradScaler::settle() {
  if (stepped_) update();
}

void GradScaler::update() {
  at::NoGradGuard no_grad;
  at::Tensor found = at::zeros({1}, scale_.options());
  for (const auto& flag : step_flags_) found.add_(flag);
  const bool deepspeed_rules = options_.hysteresis > 1 || options_.min_scale > 0;
  if (fused_ && !deepspeed_rules)
    at::_amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor, options_.backoff_factor,
                           options_.growth_interval);
  else
    update_on_host(found.item<float>() != 0.0f);
  forget_step();
}

void GradScaler::update_on_host(bool overflowed) {
  if (overflowed) {
    growth_tracker_.zero_();  // DeepSpeed's last_overflow_iter: counted for hysteresis too
    if (hysteresis_left_ > 1) {
      --hysteresis_left_;  // skipped, the scale kept
      return;
    }
    rescale(options_.backoff_factor);
    if (options_.min_scale > 0) scale_.clamp_min_(options_.min_scale);
    return;
  }
  if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
  if (growth_tracker_.item<int>() + 1 >= options_.growth_interval) {
    hysteresis_left_ = options_.hysteresis;
    rescale(options_.growth_factor);
    growth_tracker_.zero_();
  } else {
    growth_tracker_.add_(1);
  }
}

void GradScaler::rescale(double factor) {
  // As torch's _amp_update_scale_: the product in double, rounded once to float, and a growth that
  // would overflow float keeps the scale (an infinite scale would skip every later step). A float32
  // mul_ would round the factor first (3.3 is not 3.3f).
  const auto scaled = static_cast<float>(current_scale() * factor);
  if (std::isfinite(scaled)) scale_.fill_(scaled);
}

void GradScaler::forget_step() {
  step_flags_.clear();
  ++step_;
  unscaled_.clear();
  stepped_ = false;
}

double GradScaler::current_scale() const { return scale_.item<double>(); }

}  // namespace acc

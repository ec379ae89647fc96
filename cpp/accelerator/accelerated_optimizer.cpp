#include "accelerator/accelerated_optimizer.h"

namespace acc {

AcceleratedOptimizer::AcceleratedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<GradientState> state,
                                           std::shared_ptr<GradScaler> scaler)
    : OptimizerWrapper(std::move(inner)), state_(std::move(state)), scaler_(std::move(scaler)) {}

void AcceleratedOptimizer::step() {
  // LOMO updated the parameters inside backward: its step does nothing, as Accelerate's.
  if (inner_->fused_backward()) {
    step_was_skipped_ = false;
    return;
  }
  if (!state_->sync_gradients()) return;
  if (!scaler_) {
    if (clip_) clip_();
    inner_->step();
    step_was_skipped_ = false;
    return;
  }
  unscale_gradients();  // a no-op for gradients clipping already unscaled
  if (clip_) clip_();   // an overflow makes the norm inf, and the step is skipped below
  const bool found = scaler_->found_inf(overflow_);
  step_was_skipped_ = inner_->on_any_process(found);
  scaler_->check_can_back_off(step_was_skipped_);
  if (step_was_skipped_ != found) scaler_->set_found_inf(overflow_, step_was_skipped_);
  if (!step_was_skipped_) inner_->step();
  scaler_->note_optimizer_step();
}

void AcceleratedOptimizer::unscale_gradients() {
  if (!scaler_) return;
  inner_->attach_gradients();
  scaler_->unscale(inner_->gradients(), overflow_);
}

void AcceleratedOptimizer::unscale_gradients(const std::vector<at::Tensor>& grads) {
  if (scaler_) scaler_->unscale(grads, overflow_);
}

void AcceleratedOptimizer::zero_grad() {
  if (state_->sync_gradients()) inner_->zero_grad();
}

}  // namespace acc

// Accelerate's AcceleratedOptimizer: step and zero_grad only act when gradients are synchronised
// (the end of an accumulation window).
#pragma once

#include <functional>
#include <memory>

#include "accelerator/gradient_state.h"
#include "optim/optimizer.h"
#include "precision/grad_scaler.h"

namespace acc {

class AcceleratedOptimizer final : public Optimizer {
 public:
  // scaler: fp16 loss scaling (null otherwise): gradients are unscaled before the step, and a step
  // with inf/nan gradients is skipped.
  AcceleratedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<GradientState> state,
                       std::shared_ptr<GradScaler> scaler = nullptr);

  void add_param_group(const std::vector<std::string>& names, const Options& overrides) override {
    inner_->add_param_group(names, overrides);
  }
  const std::string& algorithm() const override { return inner_->algorithm(); }
  bool elementwise() const override { return inner_->elementwise(); }
  bool holds_state_slices() const override { return inner_->holds_state_slices(); }
  size_t num_param_groups() const override { return inner_->num_param_groups(); }
  double lr(size_t group) const override { return inner_->lr(group); }
  void set_lr(size_t group, double lr) override { inner_->set_lr(group, lr); }
  double default_lr() const override { return inner_->default_lr(); }
  std::optional<double> initial_lr(size_t group) const override { return inner_->initial_lr(group); }
  void set_initial_lr(size_t group, double lr, bool overwrite) override {
    inner_->set_initial_lr(group, lr, overwrite);
  }
  void step() override;
  void zero_grad() override;
  void set_train_mode(bool train) override { inner_->set_train_mode(train); }
  torch::optim::Optimizer& impl() override { return inner_->impl(); }
  void attach_gradients() override { inner_->attach_gradients(); }
  bool on_any_process(bool found) override { return inner_->on_any_process(found); }
  std::shared_ptr<Model> model() const override { return inner_->model(); }

  // fp16: divides its gradients (or `grads`, those of a model being clipped that it steps with) by
  // the loss scale, once per step, recording overflow for its own step. Nothing without a scaler.
  void unscale_gradients();
  void unscale_gradients(const std::vector<at::Tensor>& grads);
  // DeepSpeed's gradient_clipping: run by step() before the inner step, after unscaling.
  void set_gradient_clipping(std::function<void()> clip) { clip_ = std::move(clip); }

  // Whether the last step was skipped (fp16 overflow); a scheduler then does not step.
  bool step_was_skipped() const { return step_was_skipped_; }
  const std::shared_ptr<Optimizer>& unwrap() const { return inner_; }

 private:
  std::shared_ptr<Optimizer> inner_;
  std::shared_ptr<GradientState> state_;
  std::shared_ptr<GradScaler> scaler_;
  OverflowFlag overflow_;  // this optimizer's, in the scaler's current step
  bool step_was_skipped_ = false;
  std::function<void()> clip_;
};

}  // namespace acc

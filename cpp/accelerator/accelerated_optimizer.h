// Accelerate's AcceleratedOptimizer: step and zero_grad only act when gradients are synchronised
// (the end of an accumulation window).
#pragma once

#include <functional>
#include <memory>

#include "accelerator/gradient_state.h"
#include "optim/optimizer_wrapper.h"
#include "precision/grad_scaler.h"

namespace acc {

class AcceleratedOptimizer final : public OptimizerWrapper {
 public:
  // scaler: fp16 loss scaling (null otherwise): gradients are unscaled before the step, and a step
  // with inf/nan gradients is skipped.
  AcceleratedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<GradientState> state,
                       std::shared_ptr<GradScaler> scaler = nullptr);

  void step() override;
  void zero_grad() override;

  // fp16: divides its gradients (or `grads`, those of a model being clipped that it steps with) by
  // the loss scale, once per step, recording overflow for its own step. Nothing without a scaler.
  void unscale_gradients();
  void unscale_gradients(const std::vector<at::Tensor>& grads);
  // DeepSpeed's gradient_clipping: run by step() before the inner step, after unscaling.
  void set_gradient_clipping(std::function<void()> clip) { clip_ = std::move(clip); }

  // Whether the last step was skipped (fp16 overflow); a scheduler then does not step.
  bool step_was_skipped() const { return step_was_skipped_; }

  // The prepared model it steps, kept alive with it, as Accelerate's accelerator keeps what it
  // prepared: a program that frees the prepared model's handle and trains on through the optimizer
  // (and an unwrapped handle) still has that model in its checkpoints and its gradients reduced.
  void hold_prepared_model(std::shared_ptr<Model> prepared) { prepared_model_ = std::move(prepared); }

 private:
  std::shared_ptr<GradientState> state_;
  std::shared_ptr<GradScaler> scaler_;
  OverflowFlag overflow_;  // this optimizer's, in the scaler's current step
  bool step_was_skipped_ = false;
  std::function<void()> clip_;
  std::shared_ptr<Model> prepared_model_;
};

}  // namespace acc

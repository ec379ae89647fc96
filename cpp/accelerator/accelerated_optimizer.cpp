#include "accelerator/accelerated_optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace acc {

AcceleratedOptimizer::AcceleratedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<GradientState> state,
                                           std::shared_ptr<GradScaler> scaler)
    : inner_(std::move(inner)), state_(std::move(state)), scaler_(std::move(scaler)) {}

void AcceleratedOptimizer::step() {
  if (!state_->sync_gradients()) return;
  if (!scaler_) {
    inner_->step();
    step_was_skipped_ = false;
    return;
  }
  std::vector<at::Tensor> grads;
  for (auto& group : inner_->impl().param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  scaler_->unscale(grads);  // once per step: a clip_grad_norm before may have done it
  step_was_skipped_ = scaler_->found_inf();
  if (!step_was_skipped_) inner_->step();
  scaler_->update();
}

void AcceleratedOptimizer::zero_grad() {
  if (state_->sync_gradients()) inner_->zero_grad();
}

void move_optimizer_state(torch::optim::Optimizer& optimizer, const c10::Device& device) {
  auto move = [&](at::Tensor& t) {
    if (t.defined()) t = t.to(device);
  };
  for (auto& entry : optimizer.state()) {
    auto* state = entry.second.get();
    if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state)) {
      move(sgd->momentum_buffer());
    } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state)) {
      move(adam->exp_avg());
      move(adam->exp_avg_sq());
      move(adam->max_exp_avg_sq());
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state)) {
      move(adamw->exp_avg());
      move(adamw->exp_avg_sq());
      move(adamw->max_exp_avg_sq());
    }
  }
}

}  // namespace acc

// An optimizer that wraps another and hands it every call it does not change itself: the base of
// the Accelerator's AcceleratedOptimizer and of sharding's ShardedOptimizer, which override only
// their steps and what their wrapping changes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace acc {

class OptimizerWrapper : public Optimizer {
 public:
  void add_param_group(const std::vector<std::string>& names, const Options& overrides) override {
    inner_->add_param_group(names, overrides);
  }
  const std::string& algorithm() const override { return inner_->algorithm(); }
  bool elementwise() const override { return inner_->elementwise(); }
  size_t num_param_groups() const override { return inner_->num_param_groups(); }
  double lr(size_t group) const override { return inner_->lr(group); }
  void set_lr(size_t group, double lr) override { inner_->set_lr(group, lr); }
  double default_lr() const override { return inner_->default_lr(); }
  std::optional<double> initial_lr(size_t group) const override { return inner_->initial_lr(group); }
  void set_initial_lr(size_t group, double lr, bool overwrite) override {
    inner_->set_initial_lr(group, lr, overwrite);
  }
  void step() override { inner_->step(); }
  void zero_grad() override { inner_->zero_grad(); }
  void set_train_mode(bool train) override { inner_->set_train_mode(train); }
  torch::optim::Optimizer& impl() override { return inner_->impl(); }
  std::shared_ptr<Model> model() const override { return inner_->model(); }
  void attach_gradients() override { inner_->attach_gradients(); }
  bool holds_state_slices() const override { return inner_->holds_state_slices(); }
  bool on_any_process(bool found) override { return inner_->on_any_process(found); }

  // The optimizer wrapped.
  const std::shared_ptr<Optimizer>& unwrap() const { return inner_; }

 protected:
  explicit OptimizerWrapper(std::shared_ptr<Optimizer> inner) : inner_(std::move(inner)) {}

  std::shared_ptr<Optimizer> inner_;
};

}  // namespace acc

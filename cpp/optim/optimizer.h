// Optimizers over a model's parameters: SGD, Adam, AdamW (torch::optim), with parameter groups.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "model/model.h"

namespace acc {

class Optimizer {
 public:
  // algorithm: "sgd", "adam" or "adamw". Every trainable parameter goes into group 0.
  Optimizer(std::shared_ptr<Model> model, const std::string& algorithm, const Options& options);

  // Moves the named parameters into a new group with the optimizer's options plus `overrides`.
  void add_param_group(const std::vector<std::string>& names, const Options& overrides);

  size_t num_param_groups() const;
  double lr(size_t group) const;
  // The lr the optimizer was created with (transformers' optimizer.defaults["lr"]).
  double default_lr() const { return options_.get_double("lr"); }
  void set_lr(size_t group, double lr);
  void step();
  void zero_grad();

  const std::string& algorithm() const { return algorithm_; }
  const std::shared_ptr<Model>& model() const { return model_; }
  torch::optim::Optimizer& impl() { return *impl_; }

 private:
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& options) const;
  void check_group(size_t group) const;

  std::shared_ptr<Model> model_;
  std::string algorithm_;
  Options options_;
  std::unique_ptr<torch::optim::Optimizer> impl_;
  bool stepped_ = false;
};

}  // namespace acc

// Schedule-free AdamW and SGD (Defazio et al. 2024, "The Road Less Scheduled"), op for op as the
// `schedulefree` package's AdamWScheduleFree and SGDScheduleFree (1.4) step, train() and eval().
// The parameters hold y, the point gradients are taken at, while training; z is the plain
// optimizer's iterate and x, their average, what evaluation uses: eval() moves the parameters to
// x, train() back to y. Per group, the step count k, the sum of the averaging weights, the largest
// rate seen and the mode are part of the group's options, as they are in the package's param_groups.
#pragma once

#include <torch/optim/optimizer.h>

#include <tuple>

namespace acc {

// What both keep per group, beside their hyper-parameters.
struct ScheduleFreeProgress {
  int64_t k = 0;              // steps taken
  double weight_sum = 0.0;    // the sum of the averaging weights so far
  double lr_max = -1.0;       // the largest (warmed-up) rate so far
  double scheduled_lr = 0.0;  // the last step's warmed-up rate, for logging
  bool train_mode = false;    // the package starts in eval mode: train() must come before a step
};

// The shared knobs of the averaging: a linear warmup of the rate over warmup_steps, and weights
// (k+1)^r * lr_max^weight_lr_power.
struct ScheduleFreeAveraging {
  int64_t warmup_steps = 0;
  double r = 0.0;
  double weight_lr_power = 2.0;
};

struct AdamWScheduleFreeOptions : public torch::optim::OptimizerCloneableOptions<AdamWScheduleFreeOptions> {
  explicit AdamWScheduleFreeOptions(double lr = 0.0025) : lr_(lr) {}
  TORCH_ARG(double, lr) = 0.0025;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(double, inner_momentum) = 0;
  TORCH_ARG(ScheduleFreeAveraging, averaging);
  TORCH_ARG(ScheduleFreeProgress, progress);

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct SGDScheduleFreeOptions : public torch::optim::OptimizerCloneableOptions<SGDScheduleFreeOptions> {
  explicit SGDScheduleFreeOptions(double lr = 1.0) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1.0;
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(ScheduleFreeAveraging, averaging);
  TORCH_ARG(ScheduleFreeProgress, progress);

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct ScheduleFreeParamState : public torch::optim::OptimizerCloneableParamState<ScheduleFreeParamState> {
  TORCH_ARG(at::Tensor, z);
  TORCH_ARG(at::Tensor, exp_avg_sq);  // AdamW only
  TORCH_ARG(at::Tensor, exp_avg);     // AdamW with inner_momentum only
};

// train() and eval() of either optimizer.
class ScheduleFreeModes {
 public:
  virtual ~ScheduleFreeModes() = default;
  // Moves every group not yet in that mode (parameters with state move to y or x) and records it.
  virtual void set_train_mode(bool train) = 0;
  // Group 0's mode, the one the package's step checks.
  virtual bool train_mode() const = 0;
};

class AdamWScheduleFree final : public torch::optim::Optimizer, public ScheduleFreeModes {
 public:
  AdamWScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups, const AdamWScheduleFreeOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
  void set_train_mode(bool train) override;
  bool train_mode() const override;
};

class SGDScheduleFree final : public torch::optim::Optimizer, public ScheduleFreeModes {
 public:
  SGDScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups, const SGDScheduleFreeOptions& defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
  void set_train_mode(bool train) override;
  bool train_mode() const override;
};

}  // namespace acc

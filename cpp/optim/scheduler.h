// Learning-rate schedules with the names and formulas of transformers' get_scheduler(), plus
// step decay. Like PyTorch's LambdaLR: lr = base_lr * factor(step), the factor of step 0 applied
// at construction, base_lr being each group's learning rate at that moment.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "optim/schedule_options.h"
#include "optim/optimizer.h"

namespace acc {

// The factor of a named schedule at a step; exposed for tests.
std::function<double(int64_t)> schedule_factor(const std::string& name, const Options& options, double default_lr);

// Where a schedule stands, for checkpoints.
struct SchedulerState {
  int64_t step = 0;
  std::vector<double> base_lrs;
};

// What the C API sees of a scheduler; the Accelerator's wrapper is one too.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual void step() = 0;
  virtual SchedulerState state() const = 0;
  // Resumes at the saved step: each group's lr is set as the schedule gives it there.
  virtual void load_state(const SchedulerState& state) = 0;
  // The checks of load_state alone: throws what it would, changes nothing.
  virtual void check_state(const SchedulerState& state) const = 0;
  virtual double last_lr(size_t group) const = 0;
  virtual int64_t step_count() const = 0;
  virtual std::shared_ptr<Optimizer> optimizer() const = 0;
};

class LambdaScheduler final : public Scheduler {
 public:
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name, const Options& options);
  // A user schedule (PyTorch's LambdaLR): lr = base_lr * factor(step). A factor that throws, or is
  // not finite or negative, fails the step and leaves the schedule where it was.
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, std::function<double(int64_t)> factor);

  void step() override;
  SchedulerState state() const override { return {step_, base_lrs_}; }
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;
  double last_lr(size_t group) const override;
  int64_t step_count() const override { return step_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }

 private:
  void apply(int64_t step);

  std::shared_ptr<Optimizer> optimizer_;
  std::function<double(int64_t)> factor_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t step_ = 0;
};

}  // namespace acc

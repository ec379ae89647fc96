// PyTorch's ReduceLROnPlateau (transformers' "reduce_lr_on_plateau"): each step takes a metric;
// after more than `patience` steps without an improvement by `threshold` (relative or absolute)
// every group's rate is multiplied by `factor`, not below its `min_lr` and only by more than `eps`,
// then `cooldown` steps count no bad step. Same comparisons and arithmetic as PyTorch's.
#pragma once

#include "schedule/schedule_options.h"
#include "schedule/scheduler.h"

namespace acc {

class PlateauScheduler final : public Scheduler {
 public:
  PlateauScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options);

  void step() override;  // an error: this schedule needs the metric
  void step_with_metric(double metric) override;
  void then(int64_t milestone, const std::string& name, const Options& options) override;  // refused
  bool takes_metric() const override { return true; }
  SchedulerState state() const override;
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;
  double last_lr(size_t group) const override;
  int64_t step_count() const override { return last_epoch_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  size_t group_count() const override { return initial_lrs_.size(); }
  const std::string& name() const override;
  // Its settings under PyTorch's names (factor, min_lrs, patience, cooldown, mode, threshold,
  // threshold_mode, eps), in its constructor's order.
  PythonSchedulerFields python_fields(int64_t step) const override;

 private:
  bool is_better(double metric) const;
  void reduce_lrs();

  std::shared_ptr<Optimizer> optimizer_;
  bool maximize_, relative_;
  double factor_, threshold_, eps_;
  std::vector<double> min_lrs_;  // each group's floor
  int64_t patience_, cooldown_;
  std::vector<double> initial_lrs_;  // written as base_lrs, as the other schedules'
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
  std::vector<double> last_lrs_;
};

}  // namespace acc

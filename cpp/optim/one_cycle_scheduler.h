// PyTorch's OneCycleLR: from max_lr / div_factor up to max_lr over the first pct_start of
// total_steps, then down to that / final_div_factor (three_phase: back to the first rate, then
// down), each phase a cosine or linear annealing; the momentum (beta1 for Adam-like optimizers)
// moves the other way between max_momentum and base_momentum. The same phase boundaries,
// percentages and annealing arithmetic as PyTorch's, so rates and momenta are bit-identical. A
// step past total_steps is an error, as in PyTorch (a prepared scheduler stops there instead, as
// Accelerate's does).
#pragma once

#include <string>
#include <vector>

#include "optim/schedule_options.h"
#include "optim/scheduler.h"

namespace acc {

class OneCycleScheduler final : public Scheduler {
 public:
  OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options);

  void step() override;
  SchedulerState state() const override { return {step_, base_lrs_, std::nullopt, name()}; }
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;
  double last_lr(size_t group) const override;
  int64_t step_count() const override { return step_; }
  std::optional<int64_t> total_steps() const override { return total_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  const std::string& name() const override;

 private:
  struct Phase {
    double end_step;
    double start_lr, end_lr, start_momentum, end_momentum;
  };
  // The rate and momentum at `step` (PyTorch's get_lr).
  std::pair<double, double> at(int64_t step) const;
  double anneal(double start, double end, double pct) const;
  void apply(int64_t step);

  std::shared_ptr<Optimizer> optimizer_;
  int64_t total_;
  bool cosine_;
  bool cycle_momentum_;
  std::vector<Phase> phases_;
  std::vector<double> base_lrs_;  // the groups' rates before (written as the other schedules')
  std::vector<double> last_lrs_;
  int64_t step_ = 0;
};

}  // namespace acc

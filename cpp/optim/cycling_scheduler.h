// What PyTorch's OneCycleLR and CyclicLR share: every group gets one rate computed from the step
// alone, and the momentum (SGD's and RMSprop's momentum; Adam's, AdamW's and Lion's beta1) may
// move against it. A subclass gives the rate and momentum at a step and where its steps end.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/scheduler.h"

namespace acc {

class CyclingScheduler : public Scheduler {
 public:
  void step() override { apply(step_ + 1); }
  SchedulerState state() const override { return {step_, base_lrs_, std::nullopt, name()}; }
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;
  double last_lr(size_t group) const override;
  int64_t step_count() const override { return step_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  const std::string& name() const override { return name_; }

 protected:
  struct Point {
    double lr, momentum;
  };
  // With cycle_momentum, the optimizer must have a momentum to move; `low` and `high`, its ends,
  // are checked against the algorithm's range here, once. Nothing changes before start().
  CyclingScheduler(std::shared_ptr<Optimizer> optimizer, std::string name, bool cycle_momentum, double low,
                   double high);
  // Ends a subclass's constructor: records the groups' rates as the base rates and applies step 0.
  void start();
  // The rate and momentum at `step` (PyTorch's get_lr()).
  virtual Point at(int64_t step) const = 0;
  // Throws if the schedule has no `step` (OneCycleLR ends at total_steps).
  virtual void check_step(int64_t step) const;

  std::shared_ptr<Optimizer> optimizer_;

 private:
  void apply(int64_t step);

  std::string name_;
  bool cycle_momentum_;
  std::vector<double> base_lrs_;  // the groups' rates at the start (written as the other schedules')
  std::vector<double> last_lrs_;
  int64_t step_ = 0;
};

}  // namespace acc

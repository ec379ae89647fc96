// Accelerate's AcceleratedScheduler: steps only when the optimizer really stepped, and
// num_processes times per call unless batches are split (so a schedule sized for one process's
// loader length still ends on time), never past a schedule's total_steps.
#pragma once

#include <memory>

#include "accelerator/accelerated_optimizer.h"
#include "accelerator/gradient_state.h"
#include "schedule/scheduler.h"

namespace acc {

class AcceleratedScheduler final : public Scheduler {
 public:
  AcceleratedScheduler(std::shared_ptr<Scheduler> inner, std::shared_ptr<AcceleratedOptimizer> optimizer,
                       std::shared_ptr<GradientState> state, int64_t num_processes, bool split_batches,
                       bool step_with_optimizer);

  void step() override;
  void step_with_metric(double metric) override;
  void then(int64_t milestone, const std::string& name, const Options& options) override;
  void chain(const std::string& name, const Options& options) override;
  bool takes_metric() const override { return inner_->takes_metric(); }
  std::optional<int64_t> total_steps() const override { return inner_->total_steps(); }
  SchedulerState state() const override { return inner_->state(); }
  void load_state(const SchedulerState& state) override { inner_->load_state(state); }
  void check_state(const SchedulerState& state) const override { inner_->check_state(state); }
  void refuse_from_callbacks(const char* call) const override { inner_->refuse_from_callbacks(call); }
  double last_lr(size_t group) const override { return inner_->last_lr(group); }
  int64_t step_count() const override { return inner_->step_count(); }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  size_t group_count() const override { return inner_->group_count(); }
  const std::string& name() const override { return inner_->name(); }
  PythonSchedulerFields python_fields(int64_t step) const override { return inner_->python_fields(step); }
  PythonPartState python_part(size_t index, int64_t steps_in) const override {
    return inner_->python_part(index, steps_in);
  }
  const std::shared_ptr<Scheduler>& unwrap() const { return inner_; }

 private:
  // Runs `inner_step` as Accelerate's step() runs the scheduler's: once without the optimizer
  // link, else not at all unless the optimizer stepped, else `repeats_` times.
  template <class InnerStep>
  void gated(InnerStep inner_step);

  std::shared_ptr<Scheduler> inner_;
  std::shared_ptr<AcceleratedOptimizer> optimizer_;  // null when the optimizer was not prepared
  std::shared_ptr<GradientState> state_;
  int64_t repeats_;  // inner steps per step: num_processes, or 1 with split_batches
  bool step_with_optimizer_;
};

}  // namespace acc

#include "optim/one_cycle_scheduler.h"

#include <cmath>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "optim/named_schedules.h"

namespace acc {
namespace {

int64_t cycle_steps(const ScheduleOptions& o) {
  if (o.total_steps) return *o.total_steps;
  require(o.epochs && o.steps_per_epoch, "the ", kOneCycleSchedule,
          " schedule needs the option 'total_steps', or 'epochs' and 'steps_per_epoch'");
  require(*o.epochs <= INT64_MAX / *o.steps_per_epoch, "the ", kOneCycleSchedule,
          " schedule's epochs * steps_per_epoch overflows");
  return *o.epochs * *o.steps_per_epoch;
}

}  // namespace

OneCycleScheduler::OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o)
    : optimizer_(std::move(optimizer)),
      total_(cycle_steps(o)),
      cosine_(o.anneal_strategy == "cos"),
      cycle_momentum_(o.cycle_momentum) {
  require(o.max_lr.has_value(), "the ", kOneCycleSchedule, " schedule needs the option 'max_lr'");
  const double max_lr = *o.max_lr, initial_lr = max_lr / o.div_factor, min_lr = initial_lr / o.final_div_factor;
  const double top = o.max_momentum, bottom = o.base_momentum;
  const double first_end = o.pct_start * static_cast<double>(total_) - 1, last_end = static_cast<double>(total_ - 1);
  if (o.three_phase)
    phases_ = {{first_end, initial_lr, max_lr, top, bottom},
               {2.0 * o.pct_start * static_cast<double>(total_) - 2, max_lr, initial_lr, bottom, top},
               {last_end, initial_lr, min_lr, top, top}};
  else
    phases_ = {{first_end, initial_lr, max_lr, top, bottom}, {last_end, max_lr, min_lr, bottom, top}};
  // PyTorch divides by each phase's length; the first phase is reached at step 0 and the last after
  // the one before it ends, so either may not be empty.
  require(first_end != 0.0, "the ", kOneCycleSchedule, " schedule's first phase is empty (pct_start * total_steps is 1)");
  require(last_end != phases_[phases_.size() - 2].end_step, "the ", kOneCycleSchedule,
          " schedule's last phase is empty (give more total_steps or another pct_start)");
  if (o.cycle_momentum) {
    const std::string key = cycled_momentum_key(*optimizer_);
    require(!key.empty(), "the ", kOneCycleSchedule, " schedule cycles the momentum, which the ",
            optimizer_->algorithm(), " optimizer does not have (set cycle_momentum false)");
    // Both ends checked once, as the optimizer checks its own; PyTorch starts each group at max_momentum.
    for (size_t g = 0; g < optimizer_->num_param_groups(); ++g)
      for (double momentum : {bottom, top}) set_group_hyperparameter(*optimizer_, g, key, momentum);
  }
  base_lrs_ = group_lrs(*optimizer_);
  apply(0);  // PyTorch's initial step
}

double OneCycleScheduler::anneal(double start, double end, double pct) const {
  if (cosine_) return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
  return (end - start) * pct + start;
}

std::pair<double, double> OneCycleScheduler::at(int64_t step) const {
  double start_step = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& phase = phases_[i];
    if (static_cast<double>(step) <= phase.end_step || i == phases_.size() - 1) {
      const double pct = (static_cast<double>(step) - start_step) / (phase.end_step - start_step);
      return {anneal(phase.start_lr, phase.end_lr, pct), anneal(phase.start_momentum, phase.end_momentum, pct)};
    }
    start_step = phase.end_step;
  }
  return {0, 0};  // not reached: the last phase takes every step
}

void OneCycleScheduler::apply(int64_t step) {
  require(step <= total_, "the ", kOneCycleSchedule, " schedule was stepped ", step,
          " times, past its total_steps of ", total_);
  const auto [lr, momentum] = at(step);
  require(std::isfinite(lr) && lr >= 0, "the ", kOneCycleSchedule, " schedule's learning rate at step ", step, " is ",
          lr);
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    optimizer_->set_lr(g, lr);
    if (cycle_momentum_) set_cycled_momentum(*optimizer_, g, momentum);
  }
  step_ = step;
  last_lrs_.assign(optimizer_->num_param_groups(), lr);
}

void OneCycleScheduler::step() { apply(step_ + 1); }

const std::string& OneCycleScheduler::name() const {
  static const std::string one_cycle = kOneCycleSchedule;
  return one_cycle;
}

void OneCycleScheduler::check_state(const SchedulerState& state) const {
  check_schedule_name(state);
  require(!state.plateau, "the state is a ", kPlateauSchedule, " scheduler's, not this schedule's");
  require(state.step >= 0 && state.step <= total_, "a ", kOneCycleSchedule, " state's step must be in [0, ",
          total_, "], got ", state.step);
  check_group_count(state.base_lrs.size(), base_lrs_.size());
}

void OneCycleScheduler::load_state(const SchedulerState& state) {
  check_state(state);
  base_lrs_ = state.base_lrs;
  apply(state.step);
}

double OneCycleScheduler::last_lr(size_t group) const {
  return group_lr(last_lrs_, group);
}

}  // namespace acc

#include "optim/cycling_scheduler.h"

#include <cmath>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "optim/named_schedules.h"

namespace acc {

CyclingScheduler::CyclingScheduler(std::shared_ptr<Optimizer> optimizer, std::string name, bool cycle_momentum,
                                   double low, double high)
    : optimizer_(std::move(optimizer)), name_(std::move(name)), cycle_momentum_(cycle_momentum) {
  if (!cycle_momentum) return;
  require(!cycled_momentum_key(*optimizer_).empty(), "the ", name_, " schedule cycles the momentum, which the ",
          optimizer_->algorithm(), " optimizer does not have (set cycle_momentum false)");
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g)
    for (double momentum : {low, high}) check_group_hyperparameter(*optimizer_, g, cycled_momentum_key(*optimizer_), momentum);
}

void CyclingScheduler::start() {
  base_lrs_ = group_lrs(*optimizer_);
  apply(0);  // PyTorch's initial step
}

void CyclingScheduler::check_step(int64_t step) const {
  require(step >= 0, "a ", name(), " schedule's step must be >= 0, got ", step);
}

void CyclingScheduler::apply(int64_t step) {
  check_step(step);
  const Point point = at(step);
  require(std::isfinite(point.lr) && point.lr >= 0, "the ", name(), " schedule's learning rate at step ", step,
          " is ", point.lr);
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    optimizer_->set_lr(g, point.lr);
    if (cycle_momentum_) set_cycled_momentum(*optimizer_, g, point.momentum);
  }
  step_ = step;
  last_lrs_.assign(optimizer_->num_param_groups(), point.lr);
}

void CyclingScheduler::check_state(const SchedulerState& state) const {
  check_schedule_name(state);
  require(!state.plateau, "the state is a ", kPlateauSchedule, " scheduler's, not this schedule's");
  check_step(state.step);
  check_group_count(state.base_lrs.size(), base_lrs_.size());
}

void CyclingScheduler::load_state(const SchedulerState& state) {
  check_state(state);
  base_lrs_ = state.base_lrs;
  apply(state.step);
}

double CyclingScheduler::last_lr(size_t group) const {
  return group_lr(last_lrs_, group);
}

}  // namespace acc

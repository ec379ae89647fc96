#include "schedule/plateau_scheduler.h"

#include <cmath>
#include <limits>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "schedule/named_schedules.h"

namespace acc {

PlateauScheduler::PlateauScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o)
    : optimizer_(std::move(optimizer)),
      maximize_(o.mode.value_or("min") == "max"),
      relative_(o.threshold_mode == "rel"),
      factor_(o.factor.value_or(0.1)),
      threshold_(o.threshold),
      eps_(o.eps),
      patience_(o.patience),
      cooldown_(o.cooldown),
      best_(maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {
  require(o.mode.value_or("min") == "min" || *o.mode == "max", "the ", kPlateauSchedule,
          " schedule's mode is 'min' or 'max', got '", o.mode.value_or(""), "'");
  require(factor_ < 1.0, "the ", kPlateauSchedule, " schedule's factor must be < 1, got ", factor_);
  initial_lrs_ = last_lrs_ = group_lrs(*optimizer_);
  min_lrs_ = per_group(o.min_lr, 0.0, initial_lrs_.size(), "min_lr", kPlateauSchedule);
}

void PlateauScheduler::step() {
  fail(Status::InvalidArgument, "a ", kPlateauSchedule,
       " scheduler steps with the metric it follows (acc_scheduler_step_metric)");
}

void PlateauScheduler::then(int64_t, const std::string&, const Options&) {
  fail(Status::InvalidArgument, "a ", kPlateauSchedule,
       " scheduler cannot start a sequence (PyTorch's SequentialLR does not take ReduceLROnPlateau)");
}

bool PlateauScheduler::is_better(double metric) const {
  if (!maximize_) return relative_ ? metric < best_ * (1.0 - threshold_) : metric < best_ - threshold_;
  return relative_ ? metric > best_ * (threshold_ + 1.0) : metric > best_ + threshold_;
}

void PlateauScheduler::reduce_lrs() {
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    const double old_lr = optimizer_->lr(g);
    const double new_lr = std::max(old_lr * factor_, min_lrs_[g]);
    if (old_lr - new_lr > eps_) optimizer_->set_lr(g, new_lr);
  }
}

void PlateauScheduler::step_with_metric(double metric) {
  require_groups_unchanged("step");
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad steps in the cooldown do not count
  }
  if (num_bad_epochs_ > patience_) {
    reduce_lrs();
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  last_lrs_ = group_lrs(*optimizer_);
}

SchedulerState PlateauScheduler::state() const {
  return {last_epoch_, initial_lrs_, PlateauState{best_, num_bad_epochs_, cooldown_counter_, last_lrs_},
          name(),      {},           {}};
}

void PlateauScheduler::check_state(const SchedulerState& state) const {
  check_schedule_name(state);
  require_groups_unchanged("loading a scheduler's state");
  require(state.plateau.has_value(), "the state is not a ", kPlateauSchedule, " scheduler's");
  const PlateauState& p = *state.plateau;
  require(state.step >= 0, "a scheduler state needs a step >= 0, got ", state.step);
  require(!std::isnan(p.best), "the best metric is not a number");
  require(p.num_bad_epochs >= 0 && p.num_bad_epochs <= patience_, "num_bad_epochs must be in [0, patience ",
          patience_, "], got ", p.num_bad_epochs);
  require(p.cooldown_counter >= 0 && p.cooldown_counter <= cooldown_, "cooldown_counter must be in [0, cooldown ",
          cooldown_, "], got ", p.cooldown_counter);
  check_group_count(p.lrs.size(), optimizer_->num_param_groups());
  check_group_count(state.base_lrs.size(), optimizer_->num_param_groups());
  check_finite_rates(state.base_lrs, "base learning rates");
  check_finite_rates(p.lrs, "learning rates");
}

void PlateauScheduler::load_state(const SchedulerState& state) {
  check_state(state);
  const PlateauState& p = *state.plateau;
  last_epoch_ = state.step;
  initial_lrs_ = state.base_lrs;
  best_ = p.best;
  num_bad_epochs_ = p.num_bad_epochs;
  cooldown_counter_ = p.cooldown_counter;
  for (size_t g = 0; g < p.lrs.size(); ++g) optimizer_->set_lr(g, p.lrs[g]);
  last_lrs_ = p.lrs;
}

const std::string& PlateauScheduler::name() const {
  static const std::string plateau = kPlateauSchedule;
  return plateau;
}

double PlateauScheduler::last_lr(size_t group) const {
  return group_lr(last_lrs_, group);
}

PythonSchedulerFields PlateauScheduler::python_fields(int64_t) const {
  PythonSchedulerFields fields;
  fields.state = {{"factor", factor_},
                  {"min_lrs", python_floats(min_lrs_)},
                  {"patience", patience_},
                  {"cooldown", cooldown_},
                  {"mode", maximize_ ? "max" : "min"},
                  {"threshold", threshold_},
                  {"threshold_mode", relative_ ? "rel" : "abs"},
                  {"eps", eps_}};
  return fields;
}

}  // namespace acc

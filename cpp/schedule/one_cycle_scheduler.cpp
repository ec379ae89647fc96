#include "schedule/one_cycle_scheduler.h"

#include <cmath>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "schedule/named_schedules.h"

namespace acc {
namespace {

constexpr double kBaseMomentum = 0.85, kMaxMomentum = 0.95;  // PyTorch's defaults

int64_t cycle_steps(const ScheduleOptions& o) {
  if (o.total_steps) return *o.total_steps;
  require(o.epochs && o.steps_per_epoch, "the ", kOneCycleSchedule,
          " schedule needs the option 'total_steps', or 'epochs' and 'steps_per_epoch'");
  require(*o.epochs <= INT64_MAX / *o.steps_per_epoch, "the ", kOneCycleSchedule,
          " schedule's epochs * steps_per_epoch overflows");
  return *o.epochs * *o.steps_per_epoch;
}

}  // namespace

// One number for every group, or one each.
OneCycleScheduler::GroupEnds OneCycleScheduler::group_ends(const ScheduleOptions& o, size_t groups) {
  (void)cycle_steps(o);  // its error first
  require(o.max_lr.has_value(), "the ", kOneCycleSchedule, " schedule needs the option 'max_lr'");
  // PyTorch divides by both when it is made (ZeroDivisionError).
  require(o.div_factor > 0 && o.final_div_factor > 0, "the ", kOneCycleSchedule,
          " schedule divides by div_factor and final_div_factor: both must be > 0, got ", o.div_factor, " and ",
          o.final_div_factor);
  return {per_group(o.max_lr, 0.0, groups, "max_lr", kOneCycleSchedule),
          per_group(o.base_momentum, kBaseMomentum, groups, "base_momentum", kOneCycleSchedule),
          per_group(o.max_momentum, kMaxMomentum, groups, "max_momentum", kOneCycleSchedule)};
}

OneCycleScheduler::OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o)
    : OneCycleScheduler(optimizer, o, group_ends(o, optimizer->num_param_groups())) {}

OneCycleScheduler::OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o,
                                     const GroupEnds& ends)
    : CyclingScheduler(std::move(optimizer), kOneCycleSchedule, o.cycle_momentum, ends.bottom, ends.top),
      total_(cycle_steps(o)),
      cosine_(o.anneal_strategy == "cos") {
  const double first_end = o.pct_start * static_cast<double>(total_) - 1, last_end = static_cast<double>(total_ - 1);
  const double second_end = 2.0 * o.pct_start * static_cast<double>(total_) - 2;
  // PyTorch divides by each phase's length. The first phase is reached at step 0, so it may not be
  // empty; an empty last phase (pct_start 1) is reached only at step total_steps (check_step).
  require(first_end != 0.0, "the ", kOneCycleSchedule,
          " schedule's first phase is empty (pct_start * total_steps is 1)");
  last_phase_empty_ = last_end == (o.three_phase ? second_end : first_end);
  std::vector<double> initial_lrs;
  for (size_t g = 0; g < ends.max_lr.size(); ++g) {
    const double max_lr = ends.max_lr[g], initial_lr = max_lr / o.div_factor, min_lr = initial_lr / o.final_div_factor;
    initial_lrs.push_back(initial_lr);
    const double top = ends.top[g], bottom = ends.bottom[g];
    if (o.three_phase)
      phases_.push_back({{first_end, initial_lr, max_lr, top, bottom},
                         {second_end, max_lr, initial_lr, bottom, top},
                         {last_end, initial_lr, min_lr, top, top}});
    else
      phases_.push_back({{first_end, initial_lr, max_lr, top, bottom}, {last_end, max_lr, min_lr, bottom, top}});
  }
  overwrite_initial_lrs(initial_lrs);  // as PyTorch's constructor writes group["initial_lr"]
  start();
  base_lrs_ = std::move(initial_lrs);  // PyTorch's base_lrs, which it reads from there (the rule uses none)
}

PythonSchedulerFields OneCycleScheduler::python_fields(int64_t) const {
  // PyTorch names each phase's ends by the group keys that hold them.
  const bool three_phase = phases_.at(0).size() == 3;
  const char* const lr_keys[] = {"initial_lr", "max_lr", three_phase ? "initial_lr" : "min_lr", "min_lr"};
  const char* const momentum_keys[] = {"max_momentum", "base_momentum", "max_momentum", "max_momentum"};
  std::vector<c10::IValue> phases;
  for (size_t i = 0; i < phases_[0].size(); ++i) {
    const bool last = i + 1 == phases_[0].size();
    phases.push_back(
        python_dict({// The last phase ends at total_steps - 1, an int; the others at a float, as PyTorch computes them.
                     {"end_step", last ? c10::IValue(total_ - 1) : c10::IValue(phases_[0][i].end_step)},
                     {"start_lr", lr_keys[i]},
                     {"end_lr", lr_keys[i + 1]},
                     {"start_momentum", momentum_keys[i]},
                     {"end_momentum", last ? "max_momentum" : momentum_keys[i + 1]}}));
  }
  PythonSchedulerFields fields;
  fields.state = {{"total_steps", total_},
                  {"_schedule_phases", python_list(std::move(phases))},
                  {"_anneal_func_type", cosine_ ? "cos" : "linear"}};
  add_python_momentum_fields(fields);
  for (size_t g = 0; g < phases_.size(); ++g) {
    // As PyTorch's constructor writes them (initial_lr is the optimizer's own).
    auto& keys = fields.group_keys[g];
    keys.insert(keys.begin(), {{"max_lr", phases_[g][0].end_lr}, {"min_lr", phases_[g].back().end_lr}});
  }
  return fields;
}

double OneCycleScheduler::anneal(double start, double end, double pct) const {
  if (cosine_) return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
  return (end - start) * pct + start;
}

CyclingScheduler::Point OneCycleScheduler::at(int64_t step, size_t group) const {
  const std::vector<Phase>& phases = phases_[group];
  double start_step = 0.0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const Phase& phase = phases[i];
    if (static_cast<double>(step) <= phase.end_step || i == phases.size() - 1) {
      const double pct = (static_cast<double>(step) - start_step) / (phase.end_step - start_step);
      return {anneal(phase.start_lr, phase.end_lr, pct), anneal(phase.start_momentum, phase.end_momentum, pct)};
    }
    start_step = phase.end_step;
  }
  return {0, 0};  // not reached: the last phase takes every step
}

void OneCycleScheduler::check_step(int64_t step) const {
  CyclingScheduler::check_step(step);
  require(step <= total_, "the ", kOneCycleSchedule, " schedule was stepped ", step, " times, past its total_steps of ",
          total_);
  // Where PyTorch divides by zero (ZeroDivisionError), before anything changes.
  require(step < total_ || !last_phase_empty_, "the ", kOneCycleSchedule, " schedule's last phase is empty (pct_start ",
          "takes every step): step ", step, " = total_steps has no rate (PyTorch divides by zero there)");
}

}  // namespace acc

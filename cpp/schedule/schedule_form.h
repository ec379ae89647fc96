// How a schedule gives a group's learning rate at a step. PyTorch's schedulers come in two kinds:
// a closed form of the base rate and the step (LambdaLR and so transformers' schedules,
// CosineAnnealingWarmRestarts), and the chainable get_lr() of StepLR, ExponentialLR, ... , which gives
// step 0's rate from the rate the group has when the scheduler is made and each later step's from
// the rate before. ChainedScheduler steps several schedules over the same groups, each from the rate
// the one before it left.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace acc {

using ScheduleRule = std::function<double(double base_lr, int64_t step)>;

struct Schedule {
  using Start = std::function<double(double lr, double base)>;
  using Next = std::function<double(double previous, double base, int64_t step)>;

  ScheduleRule closed_form;  // set for a closed form; a chainable schedule has the two below
  Start start;               // the rate at step 0 from the group's rate then
  Next next;                 // the rate at `step` >= 1 from the rate at step - 1
};

Schedule closed_form(ScheduleRule rule);
// A chainable schedule; by default step 0 keeps the group's rate (PyTorch's get_lr() at last_epoch 0).
Schedule chainable(
    Schedule::Next next, Schedule::Start start = [](double lr, double) { return lr; });

// The rate at a step from the base rate. A chainable schedule walks its recursion from its step 0 with
// the same operations in the same order as PyTorch, remembering where each base's walk stands, so
// stepping on costs one step and an earlier step (a checkpoint) walks again from 0. Its step 0 comes
// from `made_at`, the group's rate when the scheduler was made, where that is not the base rate (a
// scheduler made after another moved the rate: PyTorch's base is the first one's initial_lr).
ScheduleRule rule_of(Schedule schedule, std::optional<double> made_at = std::nullopt);

// PyTorch's ChainedScheduler over `schedules` (made in this order on one optimizer, so each made
// its step 0 from the rate the one before set): every step runs each in turn on the rate the one
// before left. A closed form in the chain sets its own rate whatever it is handed.
Schedule chained(std::vector<Schedule> schedules);

}  // namespace acc

// The named learning-rate schedules: transformers' get_scheduler() names and formulas (the same
// floating-point operations in the same order, so the rates are bit-identical), plus PyTorch's
// own schedulers. A schedule is mostly a rule: a group's learning rate
// at a step, from its base learning rate.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/options.h"
#include "schedule/schedule_form.h"
#include "schedule/schedule_options.h"

namespace acc {

// Schedulers of their own, with no rule: PyTorch's ReduceLROnPlateau (transformers'
// "reduce_lr_on_plateau"), which steps with a metric (schedule/plateau_scheduler.h), and PyTorch's
// OneCycleLR and CyclicLR, which also cycle the momentum (schedule/one_cycle_scheduler.h,
// schedule/cyclic_scheduler.h).
inline constexpr const char* kPlateauSchedule = "reduce_lr_on_plateau";
inline constexpr const char* kOneCycleSchedule = "one_cycle";
inline constexpr const char* kCyclicSchedule = "cyclic";

// Checks that `name` is a schedule (those two included) and that it takes every key set in
// `options`: num_warmup_steps, num_training_steps and its own.
void check_schedule_options(const std::string& name, const Options& options);

// Schedule `name` with its ACC_OPTIONS_SCHEDULER options (rule_of gives its rates); `default_lr` is
// the optimizer's lr (transformers reads optimizer.defaults["lr"] for lr_end and min_lr). Every
// schedule takes num_warmup_steps and num_training_steps (ignored where unused, as get_scheduler
// does); another key it does not use, an unknown name or a missing setting is an error naming it.
Schedule named_schedule(const std::string& name, const Options& options, double default_lr);
// The same for each of `groups` parameter groups: one schedule each, which differ where an option
// takes one value per group (swa_lr's swa_lr, as PyTorch's SWALR takes a list).
std::vector<Schedule> named_group_schedules(const std::string& name, const Options& options, double default_lr,
                                            size_t groups);
// The rule of a schedule that PyTorch's SequentialLR starts at a milestone, with step(0): where the
// class has a closed form (_get_closed_form_lr), step 0's rate is the closed form's, which differs
// from get_lr()'s for cosine_annealing with an eta_min and constant_lr with total_iters 0.
ScheduleRule restarted_schedule_rule(const std::string& name, const Options& options, double default_lr);

// MultiStepLR's milestones from "30,80": steps >= 0, in any order, repeats allowed.
std::vector<int64_t> milestone_steps(const std::string& text);
// ConstantLR's factor as the schedule computes with it (unset 1/3), checked to be in (0, 1].
double constant_factor(const ScheduleOptions& o, const std::string& name);

// The names, in the order errors list them.
const std::string& schedule_names();

}  // namespace acc

#include "schedule/cyclic_scheduler.h"

#include <cmath>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"

namespace acc {
namespace {

constexpr double kBaseMomentum = 0.8, kMaxMomentum = 0.9;  // PyTorch's defaults

CyclicScheduler::Mode cyclic_mode(const std::optional<std::string>& mode) {
  const std::string m = mode.value_or("triangular");
  if (m == "triangular") return CyclicScheduler::Mode::Triangular;
  if (m == "triangular2") return CyclicScheduler::Mode::Triangular2;
  require(m == "exp_range", "the ", kCyclicSchedule,
          " schedule's mode is 'triangular', 'triangular2' or "
          "'exp_range', got '",
          m, "'");
  return CyclicScheduler::Mode::ExpRange;
}

}  // namespace

// The settings CyclicLR needs, checked before anything changes.
CyclicScheduler::GroupEnds CyclicScheduler::group_ends(const ScheduleOptions& o, size_t groups) {
  require(o.base_lr.has_value(), "the ", kCyclicSchedule, " schedule needs the option 'base_lr'");
  require(o.max_lr.has_value(), "the ", kCyclicSchedule, " schedule needs the option 'max_lr'");
  return {per_group(o.base_lr, 0.0, groups, "base_lr", kCyclicSchedule),
          per_group(o.max_lr, 0.0, groups, "max_lr", kCyclicSchedule),
          per_group(o.base_momentum, kBaseMomentum, groups, "base_momentum", kCyclicSchedule),
          per_group(o.max_momentum, kMaxMomentum, groups, "max_momentum", kCyclicSchedule)};
}

CyclicScheduler::CyclicScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o, ScaleFunction scale_fn)
    : CyclicScheduler(optimizer, o, group_ends(o, optimizer->num_param_groups()), std::move(scale_fn)) {}

CyclicScheduler::CyclicScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o, GroupEnds ends,
                                 ScaleFunction scale_fn)
    : CyclingScheduler(std::move(optimizer), kCyclicSchedule, o.cycle_momentum, ends.low_momentum, ends.high_momentum),
      ends_(std::move(ends)),
      mode_(scale_fn ? Mode::UserScale : cyclic_mode(o.mode)),
      gamma_(o.gamma.value_or(1.0)),
      scale_fn_(std::move(scale_fn)) {
  // PyTorch ignores mode and gamma beside a scale_fn, and scale_mode without one: refused, not ignored.
  if (scale_fn_) {
    require(!o.mode && !o.gamma, "the ", kCyclicSchedule,
            " schedule with a scale function does not take 'mode' or 'gamma' (the function replaces them)");
    const std::string scale_mode = o.scale_mode.value_or("cycle");
    require(scale_mode == "cycle" || scale_mode == "iterations", "the ", kCyclicSchedule,
            " schedule's scale_mode is 'cycle' or 'iterations', got '", scale_mode, "'");
    scale_by_cycle_ = scale_mode == "cycle";
  } else {
    require(!o.scale_mode, "the ", kCyclicSchedule, " schedule takes 'scale_mode' only with a scale function");
  }
  const double up = static_cast<double>(o.step_size_up);
  total_size_ = up + static_cast<double>(o.step_size_down.value_or(o.step_size_up));
  step_ratio_ = up / total_size_;
  start(ends_.base_lr);  // PyTorch's constructor sets each group's rate to base_lr
}

PythonSchedulerFields CyclicScheduler::python_fields(int64_t) const {
  const char* const modes[] = {"triangular", "triangular2", "exp_range", "triangular"};  // by Mode
  const bool by_cycle = mode_ == Mode::UserScale ? scale_by_cycle_ : mode_ != Mode::ExpRange;
  PythonSchedulerFields fields;
  fields.state = {{"max_lrs", python_floats(ends_.max_lr)},
                  {"total_size", total_size_},
                  {"step_ratio", step_ratio_},
                  {"mode", modes[static_cast<int>(mode_)]},
                  {"gamma", gamma_},
                  {"_scale_fn_custom", c10::IValue()},
                  {"scale_mode", by_cycle ? "cycle" : "iterations"}};
  add_python_momentum_fields(fields);
  if (cycles_momentum()) {
    fields.state.emplace_back("base_momentums", python_floats(ends_.low_momentum));
    fields.state.emplace_back("max_momentums", python_floats(ends_.high_momentum));
  }
  return fields;
}

// PyTorch's scale_fn: of the cycle (triangular, triangular2) or of the step (exp_range).
double CyclicScheduler::scale(int64_t cycle, int64_t step) const {
  if (mode_ == Mode::Triangular) return 1.0;
  if (mode_ == Mode::Triangular2) return 1 / std::pow(2.0, static_cast<double>(cycle - 1));
  if (mode_ == Mode::ExpRange) return std::pow(gamma_, static_cast<double>(step));
  const int64_t x = scale_by_cycle_ ? cycle : step;
  const double scale = scale_fn_(x);
  // As a LambdaLR's factor: a negative scale would take the rate below base_lr, and below 0 (PyTorch
  // then steps uphill).
  require(std::isfinite(scale) && scale >= 0, "the ", kCyclicSchedule, " schedule's scale function at ",
          scale_by_cycle_ ? "cycle " : "step ", x, " gave ", scale, " (it must be finite and >= 0)");
  return scale;
}

CyclingScheduler::Point CyclicScheduler::made_point(size_t group) const {
  // Asked before this scheduler sets initial_lr (CyclingScheduler::start): an earlier one's, if any.
  return at(0, group, optimizer_->initial_lr(group).value_or(ends_.base_lr[group]));
}

CyclingScheduler::Point CyclicScheduler::at(int64_t step, size_t group, double base_lr) const {
  const double progress = static_cast<double>(step) / total_size_;
  const auto cycle = static_cast<int64_t>(std::floor(1 + progress));
  const double x = 1.0 + progress - static_cast<double>(cycle);
  const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double height = scale(cycle, step);
  const double max_lr = ends_.max_lr[group];
  const double low = ends_.low_momentum[group], high = ends_.high_momentum[group];
  return {base_lr + (max_lr - base_lr) * scale_factor * height, high - (high - low) * scale_factor * height};
}

}  // namespace acc

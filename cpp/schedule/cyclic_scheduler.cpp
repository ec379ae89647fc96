#include "schedule/cyclic_scheduler.h"

#include <cmath>

#include "common/error.h"

namespace acc {
namespace {

constexpr double kBaseMomentum = 0.8, kMaxMomentum = 0.9;  // PyTorch's defaults

// The options CyclicLR needs, checked before anything changes.
const ScheduleOptions& checked(const ScheduleOptions& o) {
  require(o.base_lr.has_value(), "the ", kCyclicSchedule, " schedule needs the option 'base_lr'");
  require(o.max_lr.has_value(), "the ", kCyclicSchedule, " schedule needs the option 'max_lr'");
  return o;
}

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

CyclicScheduler::CyclicScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& o)
    : CyclingScheduler(std::move(optimizer), kCyclicSchedule, checked(o).cycle_momentum,
                       o.base_momentum.value_or(kBaseMomentum), o.max_momentum.value_or(kMaxMomentum)),
      base_lr_(*o.base_lr),
      max_lr_(*o.max_lr),
      low_momentum_(o.base_momentum.value_or(kBaseMomentum)),
      high_momentum_(o.max_momentum.value_or(kMaxMomentum)),
      mode_(cyclic_mode(o.mode)),
      gamma_(o.gamma.value_or(1.0)) {
  const double up = static_cast<double>(o.step_size_up);
  total_size_ = up + static_cast<double>(o.step_size_down.value_or(o.step_size_up));
  step_ratio_ = up / total_size_;
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) optimizer_->set_lr(g, base_lr_);  // as PyTorch's
  start();
}

// PyTorch's scale_fn: of the cycle (triangular, triangular2) or of the step (exp_range).
double CyclicScheduler::scale(int64_t cycle, int64_t step) const {
  if (mode_ == Mode::Triangular) return 1.0;
  if (mode_ == Mode::Triangular2) return 1 / std::pow(2.0, static_cast<double>(cycle - 1));
  return std::pow(gamma_, static_cast<double>(step));
}

CyclingScheduler::Point CyclicScheduler::at(int64_t step) const {
  const double progress = static_cast<double>(step) / total_size_;
  const auto cycle = static_cast<int64_t>(std::floor(1 + progress));
  const double x = 1.0 + progress - static_cast<double>(cycle);
  const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double height = scale(cycle, step);
  return {base_lr_ + (max_lr_ - base_lr_) * scale_factor * height,
          high_momentum_ - (high_momentum_ - low_momentum_) * scale_factor * height};
}

}  // namespace acc

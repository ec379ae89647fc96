// PyTorch's CyclicLR: the rate goes from base_lr up to max_lr in step_size_up steps and back down in
// step_size_down, over and over; "triangular2" halves each cycle's height, "exp_range" scales it
// by gamma ** step. The momentum (beta1 for Adam-like optimizers) moves the other way between
// max_momentum and base_momentum. Made, it sets every group's rate to base_lr (PyTorch replaces
// the optimizer's rate); the same operations as PyTorch's get_lr(), so the rates are bit-identical.
// base_lr, max_lr, base_momentum and max_momentum take one number per group too. A user's scale
// function (PyTorch's scale_fn, with scale_mode "cycle" or "iterations") replaces the mode.
#pragma once

#include <functional>
#include <vector>

#include "schedule/cycling_scheduler.h"
#include "schedule/named_schedules.h"
#include "schedule/schedule_options.h"

namespace acc {

class CyclicScheduler final : public CyclingScheduler {
 public:
  // How each cycle's height is scaled: not at all, halved per cycle, or by gamma ** step.
  enum class Mode { Triangular, Triangular2, ExpRange, UserScale };
  // A user's scale of each cycle's height, of the cycle (from 1) or of the step as scale_mode says.
  using ScaleFunction = std::function<double(int64_t)>;

  // scale_fn empty: the options' mode (and gamma); else the function (mode and gamma are then refused).
  CyclicScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options,
                  ScaleFunction scale_fn = nullptr);
  // PyTorch's settings (max_lrs, the cycle's size and ratio, mode, gamma, scale_mode; a scale
  // function is the program's, None here as PyTorch saves a plain function) and the momentum's fields.
  PythonSchedulerFields python_fields(int64_t step) const override;

 private:
  // Each group's ends, one number for every group or one each.
  struct GroupEnds {
    std::vector<double> base_lr, max_lr, low_momentum, high_momentum;
  };
  static GroupEnds group_ends(const ScheduleOptions& options, size_t groups);
  CyclicScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options, GroupEnds ends,
                  ScaleFunction scale_fn);

  Point at(int64_t step, size_t group) const override { return at(step, group, ends_.base_lr[group]); }
  // PyTorch's constructor steps with its base rates still the groups' initial_lr: an earlier
  // scheduler's, if one set it, instead of base_lr.
  Point made_point(size_t group) const override;
  Point at(int64_t step, size_t group, double base_lr) const;
  double scale(int64_t cycle, int64_t step) const;

  GroupEnds ends_;
  double total_size_, step_ratio_;
  Mode mode_;
  double gamma_;
  ScaleFunction scale_fn_;
  bool scale_by_cycle_ = true;  // the user's scale function takes the cycle, else the step
};

}  // namespace acc

// What PyTorch's OneCycleLR and CyclicLR share: each group's rate is computed from the step alone
// (from that group's own ends: PyTorch's settings take a number or one per group), and the momentum
// (SGD's and RMSprop's momentum; Adam's, AdamW's and Lion's beta1) may move against it. A subclass
// gives a group's rate and momentum at a step and where its steps end.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "schedule/scheduler.h"

namespace acc {

class CyclingScheduler : public IndexedScheduler {
 public:
  void check_state(const SchedulerState& state) const override;
  // A resume takes the saved rates, as PyTorch's optimizer state holds them (they differ from the
  // step's only where a rate was set by hand, or at CyclicLR's step 0 after an earlier scheduler);
  // the momentum is the step's.
  void load_state(const SchedulerState& state) override;
  // PyTorch's step(0) and SequentialLR's initial step: get_lr() at step 0 (no closed form).
  void restart() override;
  void start_again(const std::vector<double>&) override { restart(); }
  bool cycles_momentum() const { return cycle_momentum_; }

 protected:
  struct Point {
    double lr, momentum;
  };
  // With cycle_momentum, the optimizer must have a momentum to move; `lows` and `highs`, each
  // group's ends, are checked against the algorithm's range here, once. Nothing changes before start().
  CyclingScheduler(std::shared_ptr<Optimizer> optimizer, std::string name, bool cycle_momentum,
                   const std::vector<double>& lows, const std::vector<double>& highs);
  // Ends a subclass's constructor: applies step 0, checked first; `base_lrs` (empty: the groups' rates
  // now) become each group's rate and the base rates before (CyclicLR's constructor sets base_lr), so
  // that a failure changes nothing.
  void start(const std::vector<double>& base_lrs = {});
  // Group `group`'s rate and momentum at `step` (PyTorch's get_lr()).
  virtual Point at(int64_t step, size_t group) const = 0;
  // The same at step 0 when the scheduler is made (PyTorch's constructor's initial step).
  virtual Point made_point(size_t group) const { return at(0, group); }
  // Throws if the schedule has no `step` (OneCycleLR ends at total_steps).
  virtual void check_step(int64_t step) const;
  // PyTorch's fields for the momentum both keep: cycle_momentum and, when it cycles, use_beta1 in
  // `fields.state` and each group's max_momentum and base_momentum in its group keys (one list per
  // group is made here).
  void add_python_momentum_fields(PythonSchedulerFields& fields) const;

 private:
  void apply(int64_t step) override;
  // Every group's point at `step` (`made`: step 0 as made), checked (a rate finite, a momentum in range).
  std::vector<Point> points_at(int64_t step, bool made = false) const;
  void apply_points(int64_t step, const std::vector<Point>& points);

  bool cycle_momentum_;
  std::vector<double> lows_, highs_;  // each group's momentum ends
};

}  // namespace acc

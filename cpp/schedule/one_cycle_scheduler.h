// PyTorch's OneCycleLR: from max_lr / div_factor up to max_lr over the first pct_start of
// total_steps, then down to that / final_div_factor (three_phase: back to the first rate, then
// down), each phase a cosine or linear annealing; the momentum (beta1 for Adam-like optimizers)
// moves the other way between max_momentum and base_momentum. The same phase boundaries,
// percentages and annealing arithmetic as PyTorch's, so rates and momenta are bit-identical. A
// step past total_steps is an error, as in PyTorch (a prepared scheduler stops there instead, as
// Accelerate's does). max_lr, base_momentum and max_momentum take one number per group too.
#pragma once

#include <vector>

#include "schedule/cycling_scheduler.h"
#include "schedule/schedule_options.h"

namespace acc {

class OneCycleScheduler final : public CyclingScheduler {
 public:
  OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options);

  std::optional<int64_t> total_steps() const override { return total_; }
  // total_steps, the phases as PyTorch lists them, the annealing, the momentum's fields; each group's
  // max_lr, min_lr and momenta as its constructor writes them into the groups.
  PythonSchedulerFields python_fields(int64_t step) const override;

 private:
  // Each group's ends: max_lr and the momenta.
  struct GroupEnds {
    std::vector<double> max_lr, bottom, top;
  };
  static GroupEnds group_ends(const ScheduleOptions& options, size_t groups);
  OneCycleScheduler(std::shared_ptr<Optimizer> optimizer, const ScheduleOptions& options, const GroupEnds& ends);

  struct Phase {
    double end_step;
    double start_lr, end_lr, start_momentum, end_momentum;
  };
  Point at(int64_t step, size_t group) const override;
  void check_step(int64_t step) const override;
  double anneal(double start, double end, double pct) const;

  int64_t total_;
  bool cosine_;
  bool last_phase_empty_ = false;           // pct_start 1: the last phase starts where it ends
  std::vector<std::vector<Phase>> phases_;  // each group's, ending at the same steps
};

}  // namespace acc

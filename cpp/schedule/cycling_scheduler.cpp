#include "schedule/cycling_scheduler.h"

#include <cmath>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "schedule/named_schedules.h"

namespace acc {

CyclingScheduler::CyclingScheduler(std::shared_ptr<Optimizer> optimizer, std::string name, bool cycle_momentum,
                                   const std::vector<double>& lows, const std::vector<double>& highs)
    : IndexedScheduler(std::move(optimizer), std::move(name)), cycle_momentum_(cycle_momentum) {
  if (!cycle_momentum) return;
  const std::string key = cycled_momentum_key(*optimizer_);
  require(!key.empty(), "the ", name_, " schedule cycles the momentum, which the ", optimizer_->algorithm(),
          " optimizer does not have (set cycle_momentum false)");
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g)
    for (double momentum : {lows.at(g), highs.at(g)}) check_group_hyperparameter(*optimizer_, g, key, momentum);
}

void CyclingScheduler::start() {
  base_lrs_ = group_lrs(*optimizer_);  // CyclicLR has set them since the base constructor read them
  apply(0);                            // PyTorch's initial step
}

void CyclingScheduler::check_step(int64_t step) const {
  require(step >= 0, "a ", name(), " schedule's step must be >= 0, got ", step);
}

void CyclingScheduler::apply(int64_t step) {
  check_step(step);
  std::vector<Point> points;
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    points.push_back(at(step, g));
    require(std::isfinite(points[g].lr) && points[g].lr >= 0, "the ", name(), " schedule's learning rate at step ",
            step, " is ", points[g].lr);
  }
  std::vector<double> lrs;
  for (size_t g = 0; g < points.size(); ++g) {
    if (cycle_momentum_) set_cycled_momentum(*optimizer_, g, points[g].momentum);
    lrs.push_back(points[g].lr);
  }
  set_rates(step, std::move(lrs));
}

void CyclingScheduler::check_state(const SchedulerState& state) const {
  check_state_shape(state);
  check_step(state.step);
}

}  // namespace acc

#include "schedule/cycling_scheduler.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "schedule/named_schedules.h"

namespace acc {

CyclingScheduler::CyclingScheduler(std::shared_ptr<Optimizer> optimizer, std::string name, bool cycle_momentum,
                                   const std::vector<double>& lows, const std::vector<double>& highs)
    : IndexedScheduler(std::move(optimizer), std::move(name)),
      cycle_momentum_(cycle_momentum),
      lows_(lows),
      highs_(highs) {
  if (!cycle_momentum) return;
  const std::string key = cycled_momentum_key(*optimizer_);
  require(!key.empty(), "the ", name_, " schedule cycles the momentum, which the ", optimizer_->algorithm(),
          " optimizer does not have (set cycle_momentum false)");
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g)
    for (double momentum : {lows.at(g), highs.at(g)}) check_group_hyperparameter(*optimizer_, g, key, momentum);
}

void CyclingScheduler::start(const std::vector<double>& base_lrs) {
  const std::vector<Point> first = points_at(0, true);  // PyTorch's initial step, checked before any change
  for (size_t g = 0; g < base_lrs.size(); ++g) optimizer_->set_lr(g, base_lrs[g]);
  base_lrs_ = group_lrs(*optimizer_);
  apply_points(0, first);
}

void CyclingScheduler::add_python_momentum_fields(PythonSchedulerFields& fields) const {
  fields.group_keys.resize(lows_.size());
  fields.state.emplace_back("cycle_momentum", cycle_momentum_);
  if (!cycle_momentum_) return;
  fields.state.emplace_back("use_beta1", cycled_momentum_key(*optimizer_) == "beta1");
  for (size_t g = 0; g < lows_.size(); ++g) {
    fields.group_keys[g].emplace_back("max_momentum", highs_[g]);
    fields.group_keys[g].emplace_back("base_momentum", lows_[g]);
  }
}

void CyclingScheduler::check_step(int64_t step) const {
  require(step >= 0, "a ", name(), " schedule's step must be >= 0, got ", step);
}

std::vector<CyclingScheduler::Point> CyclingScheduler::points_at(int64_t step, bool made) const {
  check_step(step);
  std::vector<Point> points;
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    points.push_back(made ? made_point(g) : at(step, g));
    require(std::isfinite(points[g].lr), "the ", name(), " schedule's learning rate at step ",
            step, " is ", points[g].lr);
    // Between the group's ends it is in range (checked when made); a user's scale function or a
    // growing exp_range can move it out, checked before any change.
    const double m = points[g].momentum;
    if (cycle_momentum_ &&
        (!std::isfinite(m) || m < std::min(lows_[g], highs_[g]) || m > std::max(lows_[g], highs_[g])))
      check_group_hyperparameter(*optimizer_, g, cycled_momentum_key(*optimizer_), m);
  }
  return points;
}

void CyclingScheduler::apply(int64_t step) { apply_points(step, points_at(step)); }

void CyclingScheduler::apply_points(int64_t step, const std::vector<Point>& points) {
  std::vector<double> lrs;
  for (size_t g = 0; g < points.size(); ++g) {
    if (cycle_momentum_) set_cycled_momentum(*optimizer_, g, points[g].momentum);
    lrs.push_back(points[g].lr);
  }
  set_rates(step, std::move(lrs));
}

void CyclingScheduler::restart() {
  const auto entered = enter("step");
  apply(0);
}

void CyclingScheduler::check_state(const SchedulerState& state) const {
  const auto running = running_callbacks();
  check_state_shape(state);
  if (!state.lrs.empty() || !state.last_lrs.empty()) check_saved_rates(state);
  (void)points_at(state.step);  // a schedule that fails at that step fails here, before any change
}

void CyclingScheduler::load_state(const SchedulerState& state) {
  IndexedScheduler::load_state(state);  // checked, then the step's rates and momentum
  if (!state.lrs.empty()) restore_rates(state);
}

}  // namespace acc

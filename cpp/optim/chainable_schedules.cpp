#include "optim/chainable_schedules.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

namespace acc {
namespace {

// The rate at `step` (>= 1) from the rate at step - 1 and the group's base rate.
using Recursion = std::function<double(double previous, double base, int64_t step)>;

ScheduleRule walk(Recursion next) {
  struct Walk {
    double base, lr;
    int64_t step;
  };
  return [next = std::move(next), walks = std::make_shared<std::vector<Walk>>()](double base, int64_t step) {
    auto w = std::find_if(walks->begin(), walks->end(), [&](const Walk& x) { return x.base == base; });
    if (w == walks->end()) w = walks->insert(walks->end(), Walk{base, base, 0});
    if (w->step > step) *w = Walk{base, base, 0};  // an earlier step (a checkpoint): walk again
    for (; w->step < step; ++w->step) w->lr = next(w->lr, base, w->step + 1);
    return w->lr;
  };
}

}  // namespace

ScheduleRule step_lr_rule(int64_t step_size, double gamma) {
  return walk([=](double lr, double, int64_t s) { return s % step_size != 0 ? lr : lr * gamma; });
}

ScheduleRule multistep_lr_rule(std::vector<int64_t> milestones, double gamma) {
  return walk([milestones = std::move(milestones), gamma](double lr, double, int64_t s) {
    const auto times = std::count(milestones.begin(), milestones.end(), s);
    return times == 0 ? lr : lr * std::pow(gamma, static_cast<double>(times));
  });
}

ScheduleRule exponential_lr_rule(double gamma) {
  return walk([=](double lr, double, int64_t) { return lr * gamma; });
}

ScheduleRule cosine_annealing_lr_rule(int64_t t_max, double eta_min) {
  const double t = static_cast<double>(t_max);
  return walk([=](double lr, double base, int64_t s) {
    const int64_t period = 2 * t_max, phase = ((s - 1 - t_max) % period + period) % period;  // Python's %
    if (phase == 0) return lr + (base - eta_min) * (1 - std::cos(M_PI / t)) / 2;
    const double sd = static_cast<double>(s);
    return (1 + std::cos(M_PI * sd / t)) / (1 + std::cos(M_PI * (sd - 1) / t)) * (lr - eta_min) + eta_min;
  });
}

}  // namespace acc

#include "schedule/chainable_schedules.h"

#include <algorithm>
#include <cmath>

namespace acc {

Schedule step_lr(int64_t step_size, double gamma) {
  return chainable([=](double lr, double, int64_t s) { return s % step_size != 0 ? lr : lr * gamma; });
}

Schedule multistep_lr(std::vector<int64_t> milestones, double gamma) {
  // A milestone at step 0 applies at creation (and at a sequence's restart), as get_lr() does there.
  const auto at_start = std::count(milestones.begin(), milestones.end(), 0);
  return chainable(
      [milestones = std::move(milestones), gamma](double lr, double, int64_t s) {
        const auto times = std::count(milestones.begin(), milestones.end(), s);
        return times == 0 ? lr : lr * std::pow(gamma, static_cast<double>(times));
      },
      [at_start, gamma](double lr, double) {
        return at_start == 0 ? lr : lr * std::pow(gamma, static_cast<double>(at_start));
      });
}

Schedule exponential_lr(double gamma) {
  return chainable([=](double lr, double, int64_t) { return lr * gamma; });
}

Schedule cosine_annealing_lr(int64_t t_max, double eta_min, bool restarted) {
  const double t = static_cast<double>(t_max);
  Schedule::Start start = [](double lr, double) { return lr; };
  if (restarted)
    start = [=](double, double base) { return eta_min + (base - eta_min) * (1 + std::cos(M_PI * 0 / t)) / 2; };
  return chainable(
      [=](double lr, double base, int64_t s) {
        const int64_t period = 2 * t_max, phase = ((s - 1 - t_max) % period + period) % period;  // Python's %
        if (phase == 0) return lr + (base - eta_min) * (1 - std::cos(M_PI / t)) / 2;
        const double sd = static_cast<double>(s);
        return (1 + std::cos(M_PI * sd / t)) / (1 + std::cos(M_PI * (sd - 1) / t)) * (lr - eta_min) + eta_min;
      },
      start);
}

Schedule constant_lr(double factor, int64_t total_iters, bool restarted) {
  // The closed form at step 0 is base * (factor + (0 >= total_iters) * (1 - factor)).
  const double first = restarted && total_iters == 0 ? factor + (1 - factor) : factor;
  return chainable([=](double lr, double, int64_t s) { return s != total_iters ? lr : lr * (1.0 / factor); },
                   [=](double lr, double) { return lr * first; });
}

Schedule linear_lr(double start_factor, double end_factor, int64_t total_iters) {
  const double change = end_factor - start_factor, total = static_cast<double>(total_iters);
  return chainable(
      [=](double lr, double, int64_t s) {
        if (s > total_iters) return lr;
        return lr * (1.0 + change / (total * start_factor + static_cast<double>(s - 1) * change));
      },
      [=](double lr, double) { return lr * start_factor; });
}

Schedule polynomial_lr(int64_t total_iters, double power) {
  const double total = static_cast<double>(total_iters);
  return chainable([=](double lr, double, int64_t s) {
    if (s > total_iters) return lr;
    const double decay = (1.0 - static_cast<double>(s) / total) / (1.0 - static_cast<double>(s - 1) / total);
    return lr * std::pow(decay, power);
  });
}

Schedule swa_lr(double swa_lr, int64_t anneal_epochs, bool cosine) {
  const double span = static_cast<double>(std::max<int64_t>(1, anneal_epochs));
  const auto anneal = [cosine](double t) { return cosine ? (1 - std::cos(M_PI * t)) / 2 : t; };
  // SWALR.get_lr() at `step` from the rate before: it backs out the rate the last step started from,
  // then moves it the current step's share of the way to swa_lr.
  const auto next = [=](double lr, int64_t step) {
    const double s = static_cast<double>(anneal_epochs == 0 ? std::max<int64_t>(1, step) : step);
    const double prev_alpha = anneal(std::max(0.0, std::min(1.0, (s - 1) / span)));
    const double prev_lr = prev_alpha == 1 ? swa_lr : (lr - prev_alpha * swa_lr) / (1 - prev_alpha);
    const double alpha = anneal(std::max(0.0, std::min(1.0, s / span)));
    return swa_lr * alpha + prev_lr * (1 - alpha);
  };
  return chainable([=](double lr, double, int64_t s) { return next(lr, s); },
                   [=](double lr, double) { return next(lr, 0); });
}

Schedule cosine_annealing_warm_restarts(int64_t t_0, int64_t t_mult, double eta_min) {
  return closed_form([=](double base, int64_t step) {
    const WarmRestartsPosition at = warm_restarts_position(t_0, t_mult, step);
    return eta_min +
           (base - eta_min) * (1 + std::cos(M_PI * static_cast<double>(at.t_cur) / static_cast<double>(at.t_i))) / 2;
  });
}

WarmRestartsPosition warm_restarts_position(int64_t t_0, int64_t t_mult, int64_t step) {
  WarmRestartsPosition at{step, t_0};
  if (t_mult == 1) at.t_cur %= t_0;  // equal periods: constant time at any step
  while (at.t_cur >= at.t_i) {       // periods that grow: a logarithmic number of them
    at.t_cur -= at.t_i;
    if (at.t_i > INT64_MAX / t_mult) {
      at.overflows = true;
      break;
    }
    at.t_i *= t_mult;
  }
  return at;
}

}  // namespace acc

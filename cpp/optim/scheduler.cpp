#include "optim/scheduler.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/error.h"
#include "optim/schedule_options.h"

namespace acc {
namespace {

double warmup_factor(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
}

int64_t required(const std::optional<int64_t>& value, const char* key, const std::string& name) {
  require(value.has_value(), "the ", name, " schedule needs the option '", key, "'");
  return *value;
}

// The factor (LambdaLR's lambda) of transformers' named schedules; none for other names.
std::function<double(int64_t)> schedule_factor(const std::string& name, const ScheduleOptions& options,
                                               double default_lr) {
  const int64_t warmup = options.num_warmup_steps;
  if (name == "constant") return [](int64_t) { return 1.0; };
  if (name == "constant_with_warmup")
    return [warmup](int64_t s) { return s < warmup ? warmup_factor(s, warmup) : 1.0; };
  if (name == "linear") {
    const int64_t total = required(options.num_training_steps, "num_training_steps", name);
    return [warmup, total](int64_t s) {
      if (s < warmup) return warmup_factor(s, warmup);
      return std::max(0.0, static_cast<double>(total - s) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
    };
  }
  if (name == "cosine") {
    const int64_t total = required(options.num_training_steps, "num_training_steps", name);
    const double cycles = options.num_cycles;
    return [warmup, total, cycles](int64_t s) {
      if (s < warmup) return warmup_factor(s, warmup);
      const double progress =
          static_cast<double>(s - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * cycles * 2.0 * progress)));
    };
  }
  if (name == "polynomial") {
    const int64_t total = required(options.num_training_steps, "num_training_steps", name);
    const double lr_end = options.lr_end, power = options.power;
    require(default_lr > lr_end, "the polynomial schedule needs lr_end (", lr_end,
            ") to be smaller than the optimizer's lr (", default_lr, ")");
    return [warmup, total, lr_end, power, default_lr](int64_t s) {
      if (s < warmup) return warmup_factor(s, warmup);
      if (s > total) return lr_end / default_lr;
      const double remaining = 1.0 - static_cast<double>(s - warmup) / static_cast<double>(total - warmup);
      return ((default_lr - lr_end) * std::pow(remaining, power) + lr_end) / default_lr;
    };
  }
  return nullptr;
}

}  // namespace

ScheduleRule schedule_rule(const std::string& name, const Options& o, double default_lr) {
  require(o.kind() == OptionsKind::Scheduler, "scheduler options must be of kind scheduler, got ",
          options_kind_name(o.kind()));
  const ScheduleOptions options = scheduler_option_table().read(o);
  if (auto factor = schedule_factor(name, options, default_lr))
    return [factor](double base, int64_t s) { return base * factor(s); };
  if (name == "step") {  // PyTorch's StepLR: lr *= gamma every step_size steps (its rounding, not gamma ** k's)
    const int64_t size = required(options.step_size, "step_size", name);
    const double gamma = options.gamma;
    // Each group's last rate (by its base), so that a step goes on from it, as PyTorch's does,
    // instead of redoing every decay since the start; a step before it starts again from the base.
    struct Last {
      double base, lr;
      int64_t decays;
    };
    return [size, gamma, lasts = std::make_shared<std::vector<Last>>()](double base, int64_t s) {
      const int64_t decays = s / size;
      auto last = std::find_if(lasts->begin(), lasts->end(), [&](const Last& l) { return l.base == base; });
      if (last == lasts->end()) last = lasts->insert(lasts->end(), Last{base, base, 0});
      if (last->decays > decays) *last = Last{base, base, 0};
      for (; last->decays < decays; ++last->decays) last->lr *= gamma;
      return last->lr;
    };
  }
  fail(Status::InvalidArgument, "unknown schedule '", name,
       "' (known: constant, constant_with_warmup, linear, cosine, polynomial, step)");
}

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name, const Options& options)
    : optimizer_(std::move(optimizer)) {
  const size_t groups = optimizer_->num_param_groups();
  for (size_t g = 0; g < groups; ++g) base_lrs_.push_back(optimizer_->lr(g));
  rule_ = schedule_rule(name, options, optimizer_->default_lr());
  apply(0);
}

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, std::function<double(int64_t)> factor)
    : optimizer_(std::move(optimizer)) {
  require(factor != nullptr, "a lambda schedule needs a factor function");
  rule_ = [factor = std::move(factor)](double base, int64_t s) {
    const double f = factor(s);  // checked on its own: the message names the factor
    require(std::isfinite(f) && f >= 0, "the schedule's factor at step ", s, " is ", f, " (it must be finite and >= 0)");
    return base * f;
  };
  const size_t groups = optimizer_->num_param_groups();
  for (size_t g = 0; g < groups; ++g) base_lrs_.push_back(optimizer_->lr(g));
  apply(0);
}

std::vector<double> LambdaScheduler::lrs_at(const std::vector<double>& base_lrs, int64_t step) const {
  std::vector<double> lrs;
  for (double base : base_lrs) {
    const double lr = rule_(base, step);
    require(std::isfinite(lr) && lr >= 0, "the schedule's learning rate at step ", step, " is ", lr,
            " (it must be finite and >= 0)");
    lrs.push_back(lr);
  }
  return lrs;
}

void LambdaScheduler::apply(int64_t step) {
  std::vector<double> lrs = lrs_at(base_lrs_, step);  // first: a failing schedule changes nothing
  step_ = step;
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_->set_lr(g, lrs[g]);
  last_lrs_ = std::move(lrs);
}

void LambdaScheduler::step() { apply(step_ + 1); }

void LambdaScheduler::check_state(const SchedulerState& state) const {
  require(state.step >= 0, "a scheduler state needs a step >= 0, got ", state.step);
  require(state.base_lrs.size() == base_lrs_.size(), "the scheduler state has ", state.base_lrs.size(),
          " parameter groups, but the optimizer has ", base_lrs_.size());
  for (double lr : state.base_lrs)
    require(std::isfinite(lr) && lr >= 0, "a scheduler state's base learning rates must be finite and >= 0, got ", lr);
  (void)lrs_at(state.base_lrs, state.step);  // a schedule that fails at that step fails here, before any change
}

void LambdaScheduler::load_state(const SchedulerState& state) {
  check_state(state);
  base_lrs_ = state.base_lrs;
  apply(state.step);
}

double LambdaScheduler::last_lr(size_t group) const {
  require(group < last_lrs_.size(), "parameter group ", group, " does not exist (the scheduler has ",
          last_lrs_.size(), ")");
  return last_lrs_[group];
}

}  // namespace acc

#include "schedule/named_schedules.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/checked_math.h"
#include "common/error.h"
#include "common/text.h"
#include "schedule/chainable_schedules.h"
#include "schedule/schedule_options.h"

namespace acc {
namespace {

using Factor = std::function<double(int64_t)>;  // LambdaLR's lambda: lr = base_lr * factor(step)

double linear_warmup(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
}

// How far `step` is from the warm-up's end to `total` (transformers' "progress").
double decay_progress(int64_t step, int64_t warmup, int64_t total) {
  return static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
}

template <class T>
T required(const std::optional<T>& value, const char* key, const std::string& name) {
  require(value.has_value(), "the ", name, " schedule needs the option '", key, "'");
  return *value;
}

// transformers' min_lr_rate: given, or min_lr over the optimizer's lr; exactly one of the two.
double min_lr_rate(const ScheduleOptions& o, const std::string& name, double default_lr) {
  require(!(o.min_lr && o.min_lr_rate), "the ", name, " schedule takes one of 'min_lr' and 'min_lr_rate', not both");
  require(o.min_lr || o.min_lr_rate, "the ", name, " schedule needs the option 'min_lr' or 'min_lr_rate'");
  const std::optional<double> min_lr = one_number(o.min_lr, "min_lr", name);
  return min_lr ? *min_lr / default_lr : *o.min_lr_rate;
}

Factor cosine_factor(const ScheduleOptions& o, const std::string& name, double floor_rate) {
  const int64_t warmup = o.num_warmup_steps;
  const int64_t total = required(o.num_training_steps, "num_training_steps", name);
  const double cycles = o.num_cycles.value_or(0.5);
  return [=](int64_t s) {
    if (s < warmup) return linear_warmup(s, warmup);
    const double factor = 0.5 * (1.0 + std::cos(M_PI * cycles * 2.0 * decay_progress(s, warmup, total)));
    return std::max(0.0, factor * (1 - floor_rate) + floor_rate);
  };
}

// The shapes of warmup_stable_decay's two ramps, from progress in [0, 1).
double wsd_warmup(const std::string& type, double progress) {
  if (type == "linear") return progress;
  if (type == "cosine") return 0.5 * (1.0 - std::cos(M_PI * progress));
  return 1.0 - std::sqrt(1.0 - progress);  // 1-sqrt
}
double wsd_decay(const std::string& type, double progress, double cycles) {
  if (type == "linear") return 1.0 - progress;
  if (type == "cosine") return 0.5 * (1.0 + std::cos(M_PI * cycles * 2.0 * progress));
  return 1.0 - std::sqrt(progress);  // 1-sqrt
}

Factor wsd_factor(const ScheduleOptions& o, const std::string& name) {
  const int64_t warmup = o.num_warmup_steps;
  const int64_t decay = required(o.num_decay_steps, "num_decay_steps", name);
  require(o.num_stable_steps || o.num_training_steps, "the ", name,
          " schedule needs the option 'num_stable_steps' or 'num_training_steps'");
  // As transformers: num_stable_steps wins when both are given.
  const std::string phases = "the " + name + " schedule's num_warmup_steps + num_decay_steps";
  const int64_t warmup_and_decay = checked_add(warmup, decay, phases);
  const int64_t stable = o.num_stable_steps ? *o.num_stable_steps : *o.num_training_steps - warmup_and_decay;
  require(stable >= 0, "the ", name, " schedule's num_training_steps (", o.num_training_steps.value_or(0),
          ") is smaller than num_warmup_steps + num_decay_steps (", warmup_and_decay, ")");
  // Every phase boundary is a step count: all three together must fit (the steps are compared with them).
  checked_add(warmup_and_decay, stable, "the " + name + " schedule's num_warmup_steps + num_stable_steps + num_decay_steps");
  const std::string warmup_type = o.warmup_type, decay_type = o.decay_type;
  const double floor = o.min_lr_ratio, cycles = o.num_cycles.value_or(0.5);
  return [=](int64_t s) {
    if (s < warmup) {
      const double progress = static_cast<double>(s) / static_cast<double>(std::max<int64_t>(1, warmup));
      return std::max(0.0, wsd_warmup(warmup_type, progress) * (1.0 - floor) + floor);
    }
    if (s < warmup + stable) return 1.0;
    if (s < warmup + stable + decay) {
      const double progress =
          static_cast<double>(s - warmup - stable) / static_cast<double>(std::max<int64_t>(1, decay));
      return std::max(0.0, wsd_decay(decay_type, progress, cycles) * (1.0 - floor) + floor);
    }
    return floor;
  };
}

Schedule from_factor(Factor factor) {
  return closed_form([factor = std::move(factor)](double base, int64_t s) { return base * factor(s); });
}

using MakeRule = std::function<Schedule(const ScheduleOptions&, const std::string& name, double default_lr)>;

struct NamedSchedule {
  const char* name;
  std::vector<std::string> keys;  // what it takes beyond num_warmup_steps and num_training_steps
  MakeRule make;
  MakeRule restarted = nullptr;  // where SequentialLR's restart at a milestone differs from `make`
};

// linear_lr's and polynomial_lr's closed forms divide by total_iters: PyTorch fails restarting them without.
MakeRule restarted_needs_total_iters(MakeRule make) {
  return [make = std::move(make)](const ScheduleOptions& o, const std::string& name, double lr) {
    require(o.total_iters >= 1, "a ", name, " schedule after a milestone needs total_iters >= 1 (PyTorch divides by it)");
    return make(o, name, lr);
  };
}

Schedule checked_linear_lr(const ScheduleOptions& o, const std::string& name, double) {
  require(o.start_factor > 0, "the ", name, " schedule's start_factor must be in (0, 1], got ", o.start_factor);
  return linear_lr(o.start_factor, o.end_factor, o.total_iters);
}

const std::vector<NamedSchedule>& named_schedules() {
  using O = ScheduleOptions;
  static const std::vector<NamedSchedule> table = {
      {"constant", {}, [](const O&, const std::string&, double) { return from_factor([](int64_t) { return 1.0; }); }},
      {"constant_with_warmup",
       {},
       [](const O& o, const std::string&, double) {
         return from_factor([w = o.num_warmup_steps](int64_t s) { return s < w ? linear_warmup(s, w) : 1.0; });
       }},
      {"linear",
       {},
       [](const O& o, const std::string& name, double) {
         const int64_t warmup = o.num_warmup_steps, total = required(o.num_training_steps, "num_training_steps", name);
         return from_factor([=](int64_t s) {
           if (s < warmup) return linear_warmup(s, warmup);
           return std::max(0.0, static_cast<double>(total - s) /
                                    static_cast<double>(std::max<int64_t>(1, total - warmup)));
         });
       }},
      {"cosine",
       {"num_cycles"},
       [](const O& o, const std::string& name, double) { return from_factor(cosine_factor(o, name, 0.0)); }},
      {"cosine_with_restarts",
       {"num_cycles"},
       [](const O& o, const std::string& name, double) {
         const int64_t warmup = o.num_warmup_steps, total = required(o.num_training_steps, "num_training_steps", name);
         const double cycles = o.num_cycles.value_or(1.0);
         return from_factor([=](int64_t s) {
           if (s < warmup) return linear_warmup(s, warmup);
           const double progress = decay_progress(s, warmup, total);
           if (progress >= 1.0) return 0.0;
           return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::fmod(cycles * progress, 1.0))));
         });
       }},
      {"polynomial",
       {"power", "lr_end"},
       [](const O& o, const std::string& name, double lr) {
         const int64_t warmup = o.num_warmup_steps, total = required(o.num_training_steps, "num_training_steps", name);
         const double lr_end = o.lr_end, power = o.power;
         require(lr > lr_end, "the polynomial schedule needs lr_end (", lr_end, ") to be smaller than the optimizer's lr (",
                 lr, ")");
         // transformers divides by their difference at step num_training_steps (ZeroDivisionError mid-run).
         require(warmup != total, "the polynomial schedule decays over num_training_steps - num_warmup_steps steps, ",
                 "which is 0 here (both are ", total, ")");
         return from_factor([=](int64_t s) {
           if (s < warmup) return linear_warmup(s, warmup);
           if (s > total) return lr_end / lr;
           const double remaining = 1.0 - static_cast<double>(s - warmup) / static_cast<double>(total - warmup);
           return ((lr - lr_end) * std::pow(remaining, power) + lr_end) / lr;
         });
       }},
      {"inverse_sqrt",
       {"timescale"},
       [](const O& o, const std::string&, double) {
         const int64_t warmup = o.num_warmup_steps;
         const int64_t timescale = o.timescale.value_or(warmup > 0 ? warmup : 10000);
         return from_factor([=](int64_t s) {
           if (s < warmup) return linear_warmup(s, warmup);
           return 1.0 / std::sqrt(static_cast<double>(s + timescale - warmup) / static_cast<double>(timescale));
         });
       }},
      {"cosine_with_min_lr",
       {"num_cycles", "min_lr", "min_lr_rate"},
       [](const O& o, const std::string& name, double lr) {
         return from_factor(cosine_factor(o, name, min_lr_rate(o, name, lr)));
       }},
      {"cosine_warmup_with_min_lr",
       {"num_cycles", "min_lr", "min_lr_rate", "warmup_lr_rate"},
       [](const O& o, const std::string& name, double lr) {
         // transformers' variant counts from step + 1 and computes in floats throughout.
         const double warmup = static_cast<double>(o.num_warmup_steps);
         const double total = static_cast<double>(required(o.num_training_steps, "num_training_steps", name));
         const double cycles = o.num_cycles.value_or(0.5), floor_rate = min_lr_rate(o, name, lr);
         const std::optional<double> first = o.warmup_lr_rate;
         return from_factor([=](int64_t step) {
           const double s = static_cast<double>(step);
           if (s < warmup) {
             if (!first) return (s + 1.) / std::max(1., warmup);
             return *first + (1.0 - *first) * s / std::max(1., warmup - 1);
           }
           const double progress = (s - warmup + 1.) / std::max(1., total - warmup);
           const double factor = 0.5 * (1.0 + std::cos(M_PI * cycles * 2.0 * progress));
           return std::max(0.0, factor * (1 - floor_rate) + floor_rate);
         });
       }},
      {"warmup_stable_decay",
       {"num_stable_steps", "num_decay_steps", "warmup_type", "decay_type", "min_lr_ratio", "num_cycles"},
       [](const O& o, const std::string& name, double) { return from_factor(wsd_factor(o, name)); }},
      // PyTorch's chainable schedulers (schedule/chainable_schedules.h)
      {"step",
       {"step_size", "gamma"},
       [](const O& o, const std::string& name, double) {
         return step_lr(required(o.step_size, "step_size", name), o.gamma.value_or(0.1));
       }},
      {"multistep",
       {"milestones", "gamma"},
       [](const O& o, const std::string& name, double) {
         return multistep_lr(milestone_steps(required(o.milestones, "milestones", name)), o.gamma.value_or(0.1));
       }},
      {"exponential",
       {"gamma"},
       [](const O& o, const std::string& name, double) { return exponential_lr(required(o.gamma, "gamma", name)); }},
      {"cosine_annealing",
       {"T_max", "eta_min"},
       [](const O& o, const std::string& name, double) {
         return cosine_annealing_lr(required(o.t_max, "T_max", name), o.eta_min);
       },
       [](const O& o, const std::string& name, double) {
         return cosine_annealing_lr(required(o.t_max, "T_max", name), o.eta_min, true);
       }},
      {"constant_lr",
       {"factor", "total_iters"},
       [](const O& o, const std::string& name, double) { return constant_lr(constant_factor(o, name), o.total_iters); },
       [](const O& o, const std::string& name, double) {
         return constant_lr(constant_factor(o, name), o.total_iters, true);
       }},
      {"linear_lr",
       {"start_factor", "end_factor", "total_iters"},
       checked_linear_lr,
       restarted_needs_total_iters(checked_linear_lr)},
      {"polynomial_lr",
       {"total_iters", "power"},
       [](const O& o, const std::string&, double) { return polynomial_lr(o.total_iters, o.power); },
       restarted_needs_total_iters(
           [](const O& o, const std::string&, double) { return polynomial_lr(o.total_iters, o.power); })},
      {"cosine_annealing_warm_restarts",
       {"T_0", "T_mult", "eta_min"},
       [](const O& o, const std::string& name, double) {
         return cosine_annealing_warm_restarts(required(o.t_0, "T_0", name), o.t_mult, o.eta_min);
       }},
      {"swa_lr",
       {"swa_lr", "anneal_epochs", "anneal_strategy"},
       [](const O& o, const std::string& name, double) {
         const auto rate = one_number(o.swa_lr, "swa_lr", name);
         return swa_lr(required(rate, "swa_lr", name), o.anneal_epochs, o.anneal_strategy == "cos");
       },
       // SequentialLR restarts a later SWALR by step(0), which SWALR's get_lr() does not read (it counts
       // its own steps): not made here.
       [](const O&, const std::string&, double) -> Schedule {
         fail(Status::Unsupported, "swa_lr can only lead a sequence: PyTorch's SWALR does not restart at a milestone");
       }},
      {kPlateauSchedule,
       {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"},
       nullptr},  // a scheduler of its own
      {kOneCycleSchedule,
       {"max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy", "cycle_momentum",
        "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase"},
       nullptr},  // a scheduler of its own
      {kCyclicSchedule,
       {"base_lr", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "cycle_momentum", "base_momentum",
        "max_momentum", "scale_mode"},
       nullptr},  // a scheduler of its own
  };
  return table;
}

}  // namespace

std::vector<int64_t> milestone_steps(const std::string& text) {
  std::vector<int64_t> steps;
  for (const std::string& item : split_trimmed(text, ',')) {
    size_t used = 0;
    int64_t step = 0;
    try {
      step = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used > 0 && used == item.size() && step >= 0, "milestones must be steps >= 0 separated by commas, got '",
            text, "'");
    steps.push_back(step);
  }
  return steps;
}

double constant_factor(const ScheduleOptions& o, const std::string& name) {
  const double factor = o.factor.value_or(1.0 / 3);
  require(factor > 0 && factor <= 1, "the ", name, " schedule's factor must be in (0, 1], got ", factor);
  return factor;
}

const std::string& schedule_names() {
  static const std::string names = [] {
    std::string joined;
    for (const NamedSchedule& s : named_schedules()) joined += (joined.empty() ? "" : ", ") + std::string(s.name);
    return joined;
  }();
  return names;
}

static const NamedSchedule& checked_schedule(const std::string& name, const Options& options) {
  require(options.kind() == OptionsKind::Scheduler, "scheduler options must be of kind scheduler, got ",
          options_kind_name(options.kind()));
  const auto& table = named_schedules();
  const auto schedule = std::find_if(table.begin(), table.end(), [&](const NamedSchedule& s) { return name == s.name; });
  if (schedule == table.end())
    fail(Status::InvalidArgument, "unknown schedule '", name, "' (known: ", schedule_names(), ")");
  for (const std::string& key : options.keys_set()) {
    const bool general = key == "num_warmup_steps" || key == "num_training_steps";
    require(general || std::count(schedule->keys.begin(), schedule->keys.end(), key) > 0, "the ", name,
            " schedule does not take the option '", key, "'");
  }
  return *schedule;
}

void check_schedule_options(const std::string& name, const Options& options) { (void)checked_schedule(name, options); }

Schedule named_schedule(const std::string& name, const Options& options, double default_lr) {
  const NamedSchedule& schedule = checked_schedule(name, options);
  require(schedule.make != nullptr, "the ", name, " schedule is a scheduler of its own, with no rule");
  return schedule.make(scheduler_option_table().read(options), name, default_lr);
}

std::vector<Schedule> named_group_schedules(const std::string& name, const Options& options, double default_lr,
                                            size_t groups) {
  (void)checked_schedule(name, options);
  const ScheduleOptions o = scheduler_option_table().read(options);
  if (name != "swa_lr" || !o.swa_lr || o.swa_lr->size() == 1)
    return std::vector<Schedule>(groups, named_schedule(name, options, default_lr));
  std::vector<Schedule> schedules;
  for (const double rate : per_group(o.swa_lr, 0.0, groups, "swa_lr", name))
    schedules.push_back(swa_lr(rate, o.anneal_epochs, o.anneal_strategy == "cos"));
  return schedules;
}

ScheduleRule restarted_schedule_rule(const std::string& name, const Options& options, double default_lr) {
  const NamedSchedule& schedule = checked_schedule(name, options);
  if (!schedule.restarted) return rule_of(named_schedule(name, options, default_lr));
  return rule_of(schedule.restarted(scheduler_option_table().read(options), name, default_lr));
}

}  // namespace acc

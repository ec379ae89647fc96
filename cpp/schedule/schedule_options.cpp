#include "schedule/schedule_options.h"

#include "common/error.h"

namespace acc {

std::vector<double> per_group(const std::optional<std::vector<double>>& values, double fallback, size_t groups,
                              const char* key, const std::string& schedule) {
  if (!values) return std::vector<double>(groups, fallback);
  if (values->size() == 1) return std::vector<double>(groups, values->front());
  require(values->size() == groups, "the ", schedule, " schedule's ", key, " has ", values->size(),
          " values, one per parameter group, but the optimizer has ", groups, " groups");
  return *values;
}

std::optional<double> one_number(const std::optional<std::vector<double>>& values, const char* key,
                                 const std::string& schedule) {
  if (!values) return std::nullopt;
  require(values->size() == 1, "the ", schedule, " schedule's ", key, " is one number, got ", values->size());
  return values->front();
}

const OptionTable<ScheduleOptions>& scheduler_option_table() {
  using S = ScheduleOptions;
  static const OptionTable<S> table(OptionsKind::Scheduler, [](OptionTable<S>& t) {
    t.bind("num_warmup_steps", "steps of warm-up from 0", &S::num_warmup_steps).at_least(0);
    t.bind("num_training_steps", "where the decaying schedules end", &S::num_training_steps).at_least(1);
    t.bind("num_cycles", "cosine schedules: waves (restarts for cosine_with_restarts)", &S::num_cycles).at_least(0);
    t.bind("power", "polynomial: the decay's exponent", &S::power).at_least(0);
    t.bind("lr_end", "polynomial: the final learning rate", &S::lr_end).at_least(0);
    t.bind("step_size", "step: steps between decays", &S::step_size).at_least(1);
    t.bind("gamma", "step, multistep, exponential: the decay factor", &S::gamma).at_least(0);
    t.bind("milestones", "multistep: the steps that decay, comma-separated", &S::milestones);
    t.bind("T_max", "cosine_annealing: steps of a half cosine", &S::t_max).at_least(1);
    t.bind("eta_min", "cosine_annealing, cosine_annealing_warm_restarts: the lowest learning rate", &S::eta_min)
        .at_least(0);
    t.bind("total_iters", "constant_lr, linear_lr, polynomial_lr: the steps the change lasts", &S::total_iters)
        .at_least(0);
    t.bind("start_factor", "linear_lr: the first step's rate over the base rate", &S::start_factor)
        .at_least(0)
        .at_most(1);
    t.bind("end_factor", "linear_lr: the rate over the base rate after total_iters", &S::end_factor)
        .at_least(0)
        .at_most(1);
    t.bind("T_0", "cosine_annealing_warm_restarts: steps until the first restart", &S::t_0).at_least(1);
    t.bind("T_mult", "cosine_annealing_warm_restarts: each period over the one before", &S::t_mult).at_least(1);
    t.bind("timescale", "inverse_sqrt: steps per unit of the square root", &S::timescale).at_least(1);
    t.bind("min_lr", "cosine with min lr: the final learning rate; reduce_lr_on_plateau: the floor (or one per group)", &S::min_lr)
        .at_least(0);
    t.bind("min_lr_rate", "cosine with min lr: the final learning rate over the initial one", &S::min_lr_rate)
        .at_least(0);
    t.bind("warmup_lr_rate", "cosine_warmup_with_min_lr: the first step's rate", &S::warmup_lr_rate).at_least(0);
    t.bind("num_stable_steps", "warmup_stable_decay: steps at the full rate", &S::num_stable_steps).at_least(0);
    t.bind("num_decay_steps", "warmup_stable_decay: steps of decay", &S::num_decay_steps).at_least(0);
    t.bind("warmup_type", "warmup_stable_decay: the warm-up's shape", &S::warmup_type)
        .one_of({"linear", "cosine", "1-sqrt"});
    t.bind("decay_type", "warmup_stable_decay: the decay's shape", &S::decay_type)
        .one_of({"linear", "cosine", "1-sqrt"});
    t.bind("min_lr_ratio", "warmup_stable_decay: the lowest rate over the initial one", &S::min_lr_ratio)
        .at_least(0)
        .at_most(1);
    t.bind("mode",
           "reduce_lr_on_plateau: whether the metric should go down (min) or up (max); cyclic: the cycles' "
           "heights (triangular, triangular2, exp_range)",
           &S::mode)
        .one_of({"min", "max", "triangular", "triangular2", "exp_range"});
    t.bind("factor",
           "reduce_lr_on_plateau: what a reduction multiplies the rate by (< 1); constant_lr: the rate over the "
           "base rate until total_iters",
           &S::factor)
        .at_least(0);
    t.bind("patience", "reduce_lr_on_plateau: steps without improvement before a reduction", &S::patience)
        .at_least(0);
    t.bind("threshold", "reduce_lr_on_plateau: the least change that counts as an improvement", &S::threshold)
        .at_least(0);
    t.bind("threshold_mode", "reduce_lr_on_plateau: threshold relative to the best (rel) or absolute (abs)",
           &S::threshold_mode)
        .one_of({"rel", "abs"});
    t.bind("cooldown", "reduce_lr_on_plateau: steps after a reduction that count no bad step", &S::cooldown)
        .at_least(0);
    t.bind("eps", "reduce_lr_on_plateau: a reduction smaller than this is not made", &S::eps).at_least(0);
    t.bind("max_lr", "one_cycle, cyclic: the peak learning rate (or one per group)", &S::max_lr).at_least(0);
    t.bind("base_lr", "cyclic: the lowest learning rate, the optimizer's replaced (or one per group)", &S::base_lr).at_least(0);
    t.bind("step_size_up", "cyclic: steps from base_lr up to max_lr", &S::step_size_up).at_least(1);
    t.bind("scale_mode",
           "cyclic with a scale function (acc_scheduler_create_cyclic): what it scales by, the cycle (cycle) or "
           "the step (iterations); default cycle",
           &S::scale_mode)
        .one_of({"cycle", "iterations"});
    t.bind("step_size_down", "cyclic: steps back down (unset: step_size_up; 0: a sawtooth)", &S::step_size_down)
        .at_least(0);
    t.bind("total_steps", "one_cycle: the cycle's steps", &S::total_steps).at_least(1);
    t.bind("epochs", "one_cycle: epochs, with steps_per_epoch, instead of total_steps", &S::epochs).at_least(1);
    t.bind("steps_per_epoch", "one_cycle: steps per epoch", &S::steps_per_epoch).at_least(1);
    t.bind("pct_start", "one_cycle: the share of the cycle spent raising the rate", &S::pct_start)
        .at_least(0)
        .at_most(1);
    t.bind("anneal_strategy", "one_cycle: the shape of each phase; swa_lr: of the annealing", &S::anneal_strategy)
        .one_of({"cos", "linear"});
    t.bind("swa_lr", "swa_lr: the rate it anneals to (or one per group)", &S::swa_lr).at_least(0);
    t.bind("anneal_epochs", "swa_lr: the steps the annealing takes", &S::anneal_epochs).at_least(0);
    t.bind("cycle_momentum", "one_cycle, cyclic: move the momentum (or beta1) against the rate", &S::cycle_momentum);
    t.bind("base_momentum", "one_cycle, cyclic: the momentum at the peak rate (or one per group)", &S::base_momentum).at_least(0);
    t.bind("max_momentum", "one_cycle, cyclic: the momentum at the lowest rates (or one per group)", &S::max_momentum).at_least(0);
    t.bind("div_factor", "one_cycle: max_lr over the first rate", &S::div_factor).at_least(0);
    t.bind("final_div_factor", "one_cycle: the first rate over the last", &S::final_div_factor).at_least(0);
    t.bind("three_phase", "one_cycle: back to the first rate before the final annealing", &S::three_phase);
  });
  return table;
}

}  // namespace acc

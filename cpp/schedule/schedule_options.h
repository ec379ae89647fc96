// A named schedule's settings and the ACC_OPTIONS_SCHEDULER keys that fill them (one table: each
// default is the member initializer here; an unset optional is one whose default depends on the
// schedule, or that a schedule needs and says so).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/option_table.h"

namespace acc {

struct ScheduleOptions {
  int64_t num_warmup_steps = 0;
  std::optional<int64_t> num_training_steps;  // linear, cosine*, polynomial, warmup_stable_decay
  std::optional<double> num_cycles;           // cosine* 0.5, cosine_with_restarts 1
  double power = 1.0;                         // polynomial
  double lr_end = 1e-7;                       // polynomial
  std::optional<int64_t> step_size;           // step
  std::optional<double> gamma;                // step, multistep (0.1); exponential (needed)
  std::optional<std::string> milestones;      // multistep: "30,80"
  std::optional<int64_t> t_max;               // cosine_annealing's T_max
  double eta_min = 0.0;                       // cosine_annealing, cosine_annealing_warm_restarts
  int64_t total_iters = 5;                    // constant_lr, linear_lr, polynomial_lr
  double start_factor = 1.0 / 3;              // linear_lr
  double end_factor = 1.0;
  std::optional<int64_t> t_0;                 // cosine_annealing_warm_restarts' T_0
  int64_t t_mult = 1;                         //   and T_mult
  std::optional<int64_t> timescale;           // inverse_sqrt (num_warmup_steps, or 10000 without)
  std::optional<std::vector<double>> min_lr;  // cosine_with_min_lr, cosine_warmup_with_min_lr (one number),
                                              // reduce_lr_on_plateau;
  std::optional<double> min_lr_rate;          //   exactly one of the two
  std::optional<double> warmup_lr_rate;       // cosine_warmup_with_min_lr
  std::optional<int64_t> num_stable_steps;    // warmup_stable_decay
  std::optional<int64_t> num_decay_steps;
  std::string warmup_type = "linear";
  std::string decay_type = "cosine";
  double min_lr_ratio = 0.0;
  // reduce_lr_on_plateau (PyTorch's ReduceLROnPlateau; min_lr above is its floor, default 0)
  std::optional<std::string> mode;            // reduce_lr_on_plateau "min"; cyclic "triangular"
  std::optional<double> factor;               // reduce_lr_on_plateau 0.1; constant_lr 1/3
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";
  int64_t cooldown = 0;
  double eps = 1e-8;
  // one_cycle (PyTorch's OneCycleLR) and cyclic (PyTorch's CyclicLR)
  // max_lr, base_lr, base_momentum, max_momentum and plateau's min_lr: a number, or one per group.
  std::optional<std::vector<double>> max_lr;
  std::optional<std::vector<double>> base_lr;  // cyclic
  int64_t step_size_up = 2000;                 // cyclic
  std::optional<int64_t> step_size_down;       // cyclic: step_size_up
  std::optional<std::string> scale_mode;       // cyclic with a user's scale function: "cycle"
  std::optional<int64_t> total_steps;  // or epochs * steps_per_epoch
  std::optional<int64_t> epochs;
  std::optional<int64_t> steps_per_epoch;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";
  std::optional<std::vector<double>> swa_lr;  // swa_lr (SWALR): a rate, or one per group
  int64_t anneal_epochs = 10;
  bool cycle_momentum = true;
  std::optional<std::vector<double>> base_momentum;  // one_cycle 0.85, cyclic 0.8
  std::optional<std::vector<double>> max_momentum;   // one_cycle 0.95, cyclic 0.9
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

const OptionTable<ScheduleOptions>& scheduler_option_table();

// A per-group setting of schedule `schedule` for `groups` parameter groups: one number for every
// group, or one each (PyTorch's _format_param); `fallback` when unset. Throws naming `key` otherwise.
std::vector<double> per_group(const std::optional<std::vector<double>>& values, double fallback, size_t groups,
                              const char* key, const std::string& schedule);
// A setting that is one number here though the key takes several elsewhere.
std::optional<double> one_number(const std::optional<std::vector<double>>& values, const char* key,
                                 const std::string& schedule);

}  // namespace acc

// A named schedule's settings and the ACC_OPTIONS_SCHEDULER keys that fill them (one table: each
// default is the member initializer here; a schedule that needs an unset one says so).
#pragma once

#include <cstdint>
#include <optional>

#include "common/option_table.h"

namespace acc {

struct ScheduleOptions {
  int64_t num_warmup_steps = 0;
  std::optional<int64_t> num_training_steps;  // linear, cosine, polynomial
  double num_cycles = 0.5;                    // cosine
  double power = 1.0;                         // polynomial
  double lr_end = 1e-7;                       // polynomial
  std::optional<int64_t> step_size;           // step
  double gamma = 0.1;                         // step
};

const OptionTable<ScheduleOptions>& scheduler_option_table();

}  // namespace acc

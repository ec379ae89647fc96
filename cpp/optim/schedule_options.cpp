#include "optim/schedule_options.h"

namespace acc {

const OptionTable<ScheduleOptions>& scheduler_option_table() {
  using S = ScheduleOptions;
  static const OptionTable<S> table(OptionsKind::Scheduler, [](OptionTable<S>& t) {
    t.bind("num_warmup_steps", "steps of warm-up from 0", &S::num_warmup_steps).at_least(0);
    t.bind("num_training_steps", "where the decaying schedules end", &S::num_training_steps).at_least(1);
    t.bind("num_cycles", "cosine schedules: waves (restarts for cosine_with_restarts)", &S::num_cycles).at_least(0);
    t.bind("power", "polynomial: the decay's exponent", &S::power).at_least(0);
    t.bind("lr_end", "polynomial: the final learning rate", &S::lr_end).at_least(0);
    t.bind("step_size", "step: steps between decays", &S::step_size).at_least(1);
    t.bind("gamma", "step: the decay factor", &S::gamma).at_least(0);
    t.bind("timescale", "inverse_sqrt: steps per unit of the square root", &S::timescale).at_least(1);
    t.bind("min_lr", "cosine with min lr: the final learning rate", &S::min_lr).at_least(0);
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
  });
  return table;
}

}  // namespace acc

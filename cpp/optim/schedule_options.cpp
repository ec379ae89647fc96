#include "optim/schedule_options.h"

namespace acc {

const OptionTable<ScheduleOptions>& scheduler_option_table() {
  using S = ScheduleOptions;
  static const OptionTable<S> table(OptionsKind::Scheduler, [](OptionTable<S>& t) {
    t.bind("num_warmup_steps", "steps of linear warm-up from 0", &S::num_warmup_steps).at_least(0);
    t.bind("num_training_steps", "where linear, cosine and polynomial schedules end", &S::num_training_steps)
        .at_least(1);
    t.bind("num_cycles", "cosine: waves over the training steps", &S::num_cycles).at_least(0);
    t.bind("power", "polynomial: the decay's exponent", &S::power).at_least(0);
    t.bind("lr_end", "polynomial: the final learning rate", &S::lr_end).at_least(0);
    t.bind("step_size", "step: steps between decays", &S::step_size).at_least(1);
    t.bind("gamma", "step: the decay factor", &S::gamma).at_least(0);
  });
  return table;
}

}  // namespace acc

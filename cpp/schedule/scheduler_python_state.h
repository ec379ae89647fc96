// A scheduler's state as Python's scheduler.state_dict() gives it, which Python Accelerate's
// save_state writes to scheduler.bin and its load_state hands to load_state_dict (which updates the
// scheduler's attributes with it): the step count, base and last rates, and ReduceLROnPlateau's
// progress. Python's scheduler must be made with the same schedule and settings.
#pragma once

#include <ATen/core/ivalue.h>

#include "schedule/scheduler.h"

namespace acc {

// Unsupported (naming the schedule) where Python's scheduler keeps more than these (a sequence or
// chain of schedules, cosine_annealing_warm_restarts' cycle, one_cycle's and cyclic's rates in the
// optimizer's groups).
void require_python_scheduler_layout(const Scheduler& scheduler);
// The state dict; require_python_scheduler_layout's checks first.
c10::IValue python_scheduler_state_dict(const Scheduler& scheduler);

}  // namespace acc

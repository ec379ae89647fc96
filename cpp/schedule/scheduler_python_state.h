// A scheduler's state as Python's scheduler.state_dict() gives it, which Python Accelerate's
// save_state writes to scheduler.bin and its load_state hands to load_state_dict (which updates the
// scheduler's attributes with it): the step count, base and last rates, and ReduceLROnPlateau's
// progress. Python's scheduler must be made with the same schedule and settings.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

#include "checkpoint/torch_load.h"
#include "schedule/scheduler.h"

namespace acc {

// Unsupported (naming the schedule, after `context`) where Python's scheduler keeps more than these
// (a sequence or chain of schedules, cosine_annealing_warm_restarts' cycle, one_cycle's and cyclic's
// rates in the optimizer's groups).
void require_python_scheduler_layout(const Scheduler& scheduler, const std::string& context);
// The state dict; require_python_scheduler_layout's checks first.
c10::IValue python_scheduler_state_dict(const Scheduler& scheduler);
// The reverse: the state Python's state dict in `file` (scheduler.bin) gives this scheduler, for its
// check_state and load_state. The schedule itself is the program's (Python's LambdaLR saves no
// function either): the step count, base rates and the rates set last come from the file.
SchedulerState python_scheduler_state(const Scheduler& scheduler, const TorchSavedFile& file);

}  // namespace acc

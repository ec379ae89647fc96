// A scheduler's state as Python's scheduler.state_dict() gives it, which Python Accelerate's
// save_state writes to scheduler.bin and its load_state hands to load_state_dict (which updates the
// scheduler's attributes with it): the step count, base and last rates, ReduceLROnPlateau's
// progress, and what a schedule keeps of its own (a cycle's position, OneCycleLR's phases; a
// sequence's or chain's parts, composite_python_state.h).
// Python's scheduler must be made with the same schedule and settings.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/torch_load.h"
#include "optim/optimizer_python_state.h"
#include "schedule/scheduler.h"

namespace acc {

// Unsupported (naming the schedule) where Python's layout cannot be given: a
// cosine_annealing_warm_restarts whose next period exceeds 64 bits, alone or in a sequence or chain.
void require_python_scheduler_layout(const Scheduler& scheduler);
// The state dict, with what each schedule keeps of its own (Scheduler::python_fields, and each
// part's in a sequence or chain: Scheduler::python_part); refused as require_python_scheduler_layout says.
c10::IValue python_scheduler_state_dict(const Scheduler& scheduler);
// The keys PyTorch's constructors of `schedulers` (those made on one optimizer) wrote into each of its
// groups beyond initial_lr (OneCycleLR's max_lr, min_lr and momenta, SWALR's swa_lr), for its optimizer.bin.
SchedulerGroupKeys python_scheduler_group_keys(const std::vector<std::shared_ptr<Scheduler>>& schedulers);
// The reverse: the state Python's state dict in `file` (scheduler.bin) gives this scheduler, for its
// check_state and load_state. The schedule itself is the program's (Python's LambdaLR saves no
// function either): the step count, base rates and the rates set last come from the file; where
// the file says where a cycle stands or how long it is (T_cur, T_i, T_0, total_steps: an integer
// field this schedule has too), it must say what this schedule gives at that step.
SchedulerState python_scheduler_state(const Scheduler& scheduler, const TorchSavedFile& file);

}  // namespace acc

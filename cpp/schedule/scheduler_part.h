// The checkpoint part of a scheduler (scheduler[_i].json: its schedule's name, step and base
// learning rates, and ReduceLROnPlateau's standing).
#pragma once

#include <memory>
#include <string>

#include "checkpoint/checkpoint_part.h"
#include "schedule/scheduler.h"

namespace acc {

std::unique_ptr<CheckpointPart> scheduler_part(size_t index, std::shared_ptr<Scheduler> scheduler);
// A state read from `path` (this library's file or Python's), checked; what loads it.
StagedLoad staged_scheduler_load(std::shared_ptr<Scheduler> scheduler, const SchedulerState& state,
                                 const std::string& path);

}  // namespace acc

// The checkpoint part of a scheduler (scheduler[_i].json: its schedule's name, step and base
// learning rates, and ReduceLROnPlateau's standing).
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "schedule/scheduler.h"

namespace acc {

std::unique_ptr<CheckpointPart> scheduler_part(size_t index, std::shared_ptr<Scheduler> scheduler);

}  // namespace acc

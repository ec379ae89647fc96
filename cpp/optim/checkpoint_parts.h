// The checkpoint parts of optimizers (optimizer[_i].safetensors: state by parameter name, groups'
// hyper-parameters as metadata) and schedulers (scheduler[_i].json: step and base learning rates).
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "optim/optimizer.h"
#include "optim/scheduler.h"

namespace acc {

std::unique_ptr<CheckpointPart> optimizer_part(size_t index, std::shared_ptr<Optimizer> optimizer);
std::unique_ptr<CheckpointPart> scheduler_part(size_t index, std::shared_ptr<Scheduler> scheduler);

}  // namespace acc

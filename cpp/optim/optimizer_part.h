// The checkpoint part of an optimizer (optimizer[_i].safetensors: state by parameter name, groups'
// hyper-parameters as metadata).
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "optim/optimizer.h"

namespace acc {

std::unique_ptr<CheckpointPart> optimizer_part(size_t index, std::shared_ptr<Optimizer> optimizer);

}  // namespace acc

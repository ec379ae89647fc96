// The checkpoint part of a model: its weights (parameters and buffers) as model[_i].safetensors.
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "model/model.h"

namespace acc {

// The i-th prepared model's part (the unwrapped model: names without DDP's "module.").
std::unique_ptr<CheckpointPart> weights_part(size_t index, std::shared_ptr<Model> model);

}  // namespace acc

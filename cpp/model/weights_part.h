// The checkpoint part of a model: its weights (parameters and buffers) as model[_i].safetensors.
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "model/model.h"

namespace acc {

// A prepared model's part (the unwrapped model: names without DDP's "module."), in the checkpoint's
// file_index-th weight file; model_index (its place in prepare order) names it in messages.
std::unique_ptr<CheckpointPart> weights_part(size_t file_index, size_t model_index, std::shared_ptr<Model> model);
// Python Accelerate's pytorch_model[_i].bin (saved with safe_serialization=False: torch.save of the
// state dict), read only: load_state takes it from a folder Python Accelerate wrote.
std::unique_ptr<CheckpointPart> pickled_weights_part(size_t file_index, size_t model_index,
                                                     std::shared_ptr<Model> model);

}  // namespace acc

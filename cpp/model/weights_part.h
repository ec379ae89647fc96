// The checkpoint part of a model: its weights (parameters and buffers) as model[_i].safetensors.
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "checkpoint/safetensors.h"
#include "model/model.h"

namespace acc {

// The metadata of a model's weights file: PyTorch's format, and the adapter whose tensors it holds
// (a model's adapters are its active one's: named adapters keep their usual names there).
Metadata weights_metadata(const Model& model);
// Fails (InvalidArgument, naming `path`, `model_index` and both adapters) where a weights file's
// `metadata` names another adapter than the model's active one: loading would write one adapter's
// values into another.
void require_same_adapter(const Model& model, size_t model_index, const Metadata& metadata, const std::string& path);

// A prepared model's part (the unwrapped model: names without DDP's "module."), in the checkpoint's
// file_index-th weight file; model_index (its place in prepare order) names it in messages.
std::unique_ptr<CheckpointPart> weights_part(size_t file_index, size_t model_index, std::shared_ptr<Model> model);
// Python Accelerate's pytorch_model[_i].bin (saved with safe_serialization=False: torch.save of the
// state dict), read only: load_state takes it from a folder Python Accelerate wrote.
std::unique_ptr<CheckpointPart> pickled_weights_part(size_t file_index, size_t model_index,
                                                     std::shared_ptr<Model> model);

}  // namespace acc

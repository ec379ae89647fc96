// The checkpoint part of an averaged model registered for checkpointing (Accelerate's
// register_for_checkpointing(AveragedModel)): its state_dict as custom_checkpoint_<i>.safetensors,
// which Python's AveragedModel.load_state_dict(safetensors.torch.load_file(...)) reads.
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "optim/averaged_model.h"

namespace acc {

std::unique_ptr<CheckpointPart> averaged_model_part(size_t index, std::shared_ptr<AveragedModel> averaged);

}  // namespace acc

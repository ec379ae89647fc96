// The checkpoint part of an object the program registered for checkpointing (Accelerate's
// register_for_checkpointing): its bytes as custom_checkpoint_<i>.bin. Its load callback is the only
// check of those bytes, so the part loads first and can be rolled back to the bytes its save gave
// just before.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_part.h"

namespace acc {

std::unique_ptr<CheckpointPart> registered_object_part(size_t index, std::function<std::string()> save,
                                                       std::function<void(const std::string&)> load);

}  // namespace acc

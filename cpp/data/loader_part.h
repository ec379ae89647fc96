// The checkpoint part of the prepared data loaders: this process's loader positions (epoch, batches
// taken, shuffle seeds and generator state) as dataloader_state_<rank>.json, one entry per loader.
#pragma once

#include <memory>
#include <vector>

#include "checkpoint/checkpoint_part.h"
#include "data/dataloader.h"

namespace acc {

std::unique_ptr<CheckpointPart> loader_states_part(int64_t rank, std::vector<std::shared_ptr<DataLoader>> loaders);

}  // namespace acc

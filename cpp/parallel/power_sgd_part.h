// The checkpoint part of DDP's PowerSGD hooks: each process's PowerSGDState (its error feedback is
// its own), as ddp_comm_hook_<rank>.safetensors, so that a resumed job compresses exactly as the
// uninterrupted one would have. (Accelerate saves no comm hook state: its resumed PowerSGD starts
// again with start_powerSGD_iter plain steps and fresh projections.)
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_part.h"
#include "parallel/power_sgd.h"

namespace acc {

// The states of the prepared models that use PowerSGD, by model index. A checkpoint saved without
// this part (no PowerSGD then) starts their PowerSGD afresh, as a new job does.
std::unique_ptr<CheckpointPart> power_sgd_states_part(int64_t rank,
                                                      std::vector<std::pair<size_t, std::shared_ptr<PowerSgdState>>> states);

}  // namespace acc

// The checkpoint part of the random number generators: this process's CPU generator and each CUDA
// device's, as random_states_<rank>.safetensors (uint8 tensors named "cpu", "cuda_<i>").
#pragma once

#include <cstdint>
#include <memory>

#include "checkpoint/checkpoint_part.h"

namespace acc {

// `step` is stored as metadata, as Accelerate stores it beside the states.
std::unique_ptr<CheckpointPart> rng_states_part(int64_t rank, int64_t step);

}  // namespace acc

// The checkpoint part of the random number generators: this process's CPU generator and each CUDA
// device's, as random_states_<rank>.safetensors (uint8 tensors named "cpu", "cuda_<i>").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"

#include "checkpoint/checkpoint_part.h"

namespace acc {

// `step` is stored as metadata, as Accelerate stores it beside the states.
std::unique_ptr<CheckpointPart> rng_states_part(int64_t rank, int64_t step);

// Checks generator states read from `path` ("cpu", "cuda_<i>": each as get_state gives it) and
// returns what sets them. The CPU's must be there; a GPU without a state keeps its own.
StagedLoad restore_generator_states(const NamedTensors& saved, const std::string& path);

}  // namespace acc

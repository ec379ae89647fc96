// What Python Accelerate's save_state puts in random_states_<rank>.pkl, for a run made here: the
// accelerator's step, torch's CPU and CUDA generator states, and Python's `random` and NumPy's
// global states. A C program has neither of the last two: they are written as Accelerate's
// set_seed(s) leaves them, s being the seed torch's CPU generator was last given (acc_set_seed's, or
// torch's default), so that a Python run resuming from the file starts from states it could have.
#pragma once

#include <ATen/core/ivalue.h>

#include <array>
#include <cstdint>

#include "checkpoint/torch_load.h"
#include "model/model.h"

namespace acc {

// CPython's random.seed(seed) for a non-negative int: its Mersenne Twister's 624 words.
std::array<uint32_t, 624> python_random_seeded(uint64_t seed);
// NumPy's legacy np.random.seed(seed & 0xffffffff): its key's 624 words.
std::array<uint32_t, 624> numpy_random_seeded(uint32_t seed);

// The dict torch.save writes to random_states_<rank>.pkl (keys as Accelerate's).
c10::IValue python_random_states(int64_t step);

// What a random_states_<rank>.pkl of Python Accelerate's holds that this library uses: the step and
// torch's generator states ("cpu", "cuda_<i>", as restore_generator_states takes them). Python's
// `random` and NumPy's states have no counterpart in a C program and are passed over.
struct PythonRandomStates {
  int64_t step = 0;
  NamedTensors generators;
};
PythonRandomStates read_python_random_states(const TorchSavedFile& file);

}  // namespace acc

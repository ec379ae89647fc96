// A file of Python Accelerate's checkpoint layout, in torch.save's format: optimizer.bin,
// scheduler.bin, scaler.pt, random_states_<rank>.pkl. Written beside the library's own files with
// option python_state_files (for Python Accelerate's load_state), and read when load_state is given a
// folder Python Accelerate wrote.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_part.h"
#include "checkpoint/torch_load.h"

namespace acc {

// `state` makes what is written; `load` checks what was read (the file's errors name it) and returns
// what applies it.
std::unique_ptr<CheckpointPart> python_state_part(std::string file, bool per_process,
                                                  std::function<c10::IValue()> state,
                                                  std::function<StagedLoad(const TorchSavedFile&)> load);

}  // namespace acc

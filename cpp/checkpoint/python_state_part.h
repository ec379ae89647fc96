// A file of a checkpoint written only for Python Accelerate's load_state (option
// python_state_files): optimizer.bin, scheduler.bin, scaler.pt, random_states_<rank>.pkl, in
// torch.save's format. The library reads its own files; these it writes and never reads.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_part.h"

namespace acc {

std::unique_ptr<CheckpointPart> python_state_part(std::string file, bool per_process,
                                                  std::function<c10::IValue()> state);

}  // namespace acc

// An optimizer's state as Python's optimizer.state_dict() gives it, which Python Accelerate's
// save_state writes to optimizer.bin and its load_state hands to load_state_dict: parameters
// numbered in group order, each stepped one's state under PyTorch's field names, and each group's
// hyper-parameters under PyTorch's keys (betas as a tuple, ...).
#pragma once

#include <ATen/core/ivalue.h>

#include "optim/optimizer.h"

namespace acc {

// Unsupported (naming it) for an algorithm that has no such Python counterpart here (the
// schedule-free ones) and for a sharded optimizer's slices.
void require_python_optimizer_layout(const Optimizer& optimizer);
// The state dict; require_python_optimizer_layout's checks first.
c10::IValue python_optimizer_state_dict(Optimizer& optimizer);

}  // namespace acc

// An optimizer's state as Python's optimizer.state_dict() gives it, which Python Accelerate's
// save_state writes to optimizer.bin and its load_state hands to load_state_dict: parameters
// numbered in group order, each stepped one's state under PyTorch's field names, and each group's
// hyper-parameters under PyTorch's keys (betas as a tuple, ...).
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

#include "checkpoint/torch_load.h"
#include "optim/optimizer.h"
#include "optim/optimizer_state.h"

namespace acc {

// Unsupported (naming it, after `context`) for an algorithm that has no such Python counterpart here
// (the schedule-free ones) and for a sharded optimizer's slices.
void require_python_optimizer_layout(const Optimizer& optimizer, const std::string& context);
// Per group, the keys its schedulers' Python counterparts wrote into it (max_lr, swa_lr, ...).
using SchedulerGroupKeys = std::vector<std::vector<std::pair<std::string, double>>>;
// The state dict, each group with `scheduler_keys` after initial_lr; require_python_optimizer_layout's
// checks first.
c10::IValue python_optimizer_state_dict(Optimizer& optimizer, const SchedulerGroupKeys& scheduler_keys = {});
// The reverse: Python's state dict as read from `file` (optimizer.bin), as a snapshot of this
// optimizer for prepare_optimizer_restore. Each group's parameters are this optimizer's, in order;
// its hyper-parameters are the file's (as PyTorch's load_state_dict takes them), PyTorch's flags
// for how to compute (foreach, fused, capturable, differentiable) set aside, and a key this
// algorithm has no counterpart for refused.
OptimizerSnapshot python_optimizer_snapshot(Optimizer& optimizer, const TorchSavedFile& file);

}  // namespace acc

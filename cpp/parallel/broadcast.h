// Broadcasts tensors from one process into every process's tensors, in place: one collective per
// dtype (buffers are broadcast before every training forward, so not one per tensor).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "state/distributed.h"

namespace acc {

void broadcast_in_place(Distributed& dist, const std::vector<at::Tensor>& tensors, const std::string& name,
                        int64_t source = 0);

}  // namespace acc

// Broadcasts tensors from one process into every process's tensors, in place. Tensors of a dtype
// travel together in buckets of at most 250 MiB (torch's _sync_module_states bucket): buffers are
// broadcast before every training forward, so not one collective per tensor, yet a large model's
// first broadcast never needs a second copy of the whole model.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "state/distributed.h"

namespace acc {

// How broadcast_in_place groups `tensors`: by dtype (dtypes in ScalarType order), in the given
// order, a bucket closing before a tensor that would take it past `bucket_bytes` (a larger tensor
// travels alone); empty tensors are left out.
std::vector<std::vector<at::Tensor>> broadcast_buckets(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes);

void broadcast_in_place(Distributed& dist, const std::vector<at::Tensor>& tensors, const std::string& name,
                        int64_t source = 0);

}  // namespace acc

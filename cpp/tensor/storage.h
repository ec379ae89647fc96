// A tensor whose memory comes and goes while the tensor stays: stage 3 frees a unit's parameters
// between uses, and LoRA's adapted weights between a unit's forward and its backward. Autograd
// keeps the tensors (or views of them) it saved, so the block behind them is freed and later
// refilled in place, never the tensor replaced.
#pragma once

#include <ATen/ATen.h>

namespace acc {

// Frees the block behind `t` and every view of it; the tensor keeps its shape (a read before
// restore_storage or take_storage finds no data).
void free_storage(const at::Tensor& t);
// Gives `t` a block of its size again (uninitialised) when free_storage took it.
void restore_storage(const at::Tensor& t);
// Moves `from`'s block under `t`, which must be laid out alike (contiguous, the same size and
// dtype); `from` is left without one.
void take_storage(const at::Tensor& t, const at::Tensor& from);

}  // namespace acc

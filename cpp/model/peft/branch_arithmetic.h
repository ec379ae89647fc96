// Small steps PEFT's adapter layers share, written once: the dropout a branch takes on its input
// (nn.Dropout, or nn.Identity where p is 0: no draw), and the test by which a merge computes half
// precision on the CPU in float32 (PEFT's cast_to_fp32).
#pragma once

#include <ATen/ATen.h>

namespace acc {

inline at::Tensor branch_dropout(const at::Tensor& x, double p, bool training) {
  return p > 0 ? at::dropout(x, p, training) : x;
}

// Whether a merge from tensors like `t` computes in float32 and casts back (CPU half precision).
inline bool merges_in_float32(const at::Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

}  // namespace acc

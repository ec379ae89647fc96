// torch.norm(t) and t.norm(dim=...) with their default p "fro", as Python computes them with the
// libtorch at hand: 1.13 calls frobenius_norm; 2.x calls linalg.vector_norm(t, 2, dim), and its
// frobenius_norm is deprecated (a warning on first use). PEFT's layers call them so (OFT, HRA).
#pragma once

#include <ATen/ATen.h>

#include "common/compat.h"

namespace acc {

// `dims` empty: every element (Python's dim=None).
inline at::Tensor fro_norm(const at::Tensor& t, at::IntArrayRef dims, bool keepdim = false) {
#if ACC_TORCH_VERSION >= 200
  return dims.empty() ? at::linalg_vector_norm(t, 2, c10::nullopt, keepdim, c10::nullopt)
                      : at::linalg_vector_norm(t, 2, dims, keepdim, c10::nullopt);
#else
  return at::frobenius_norm(t, dims, keepdim);
#endif
}

}  // namespace acc

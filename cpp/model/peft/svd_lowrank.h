// torch.svd_lowrank, which libtorch does not have (it is Python, torch/_lowrank.py): PiSSA's
// pissa_niter_<n> start (model/peft/lora_init.h) and EVA's incremental PCA (model/peft/incremental_pca.h) take it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <tuple>

namespace acc {

// torch.svd_lowrank(A, q, niter) as PyTorch 2.x computes it (Halko et al.'s algorithm 5.1 on A, or
// on A^T where A is wide, with get_approximate_basis's Gaussian start drawn from the global
// generator of A's device, in A's dtype): U (m x q), S (q), V (n x q). PyTorch 1.13's differs (it
// takes the transpose also where n > q); 2.x is what users have.
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_lowrank(const at::Tensor& matrix, int64_t q, int64_t niter);

}  // namespace acc

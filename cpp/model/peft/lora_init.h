// PEFT's initialisations that take a LoRA adapter's start from its layer's weight and leave the
// residual in the weight, so that the adapted layer starts computing as before (to rounding):
// OLoRA (the weight's QR decomposition) and PiSSA (its principal singular vectors, by an exact SVD,
// or with "pissa_niter_<n>" by torch.svd_lowrank's randomised SVD, which draws from the global
// generator). And MiCA, which starts B from the weight's minor singular vectors (frozen), A at zero,
// leaving the weight as it is. And PEFT's orthogonal start, which takes nothing from the weight. CorDA,
// LoRA-GA and LoftQ have files of their own (model/peft/corda.h, lora_ga.h, loftq.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

namespace acc {

// Whether `init` (init_lora_weights) is one of them: "olora", "pissa", "pissa_niter_<n>", or CorDA's
// "corda" (model/peft/corda.h) and LoRA-GA's "lora_ga" (model/peft/lora_ga.h), whose starts come from data,
// or LoftQ's "loftq" (model/peft/loftq.h), which replaces the weight by its quantised approximation.
bool decomposes_weight(const std::string& init);
// Fails (InvalidArgument, naming the value) unless `init` is an init_lora_weights value the adapters
// can start from: "true", "false", "gaussian", "mica", "orthogonal", "eva", and those decomposes_weight accepts.
void check_lora_init(const std::string& init);

// PEFT's mica_init: the r left singular vectors of `matrix` (out x in: a linear layer's weight, an
// embedding's transposed) with the smallest singular values, as lora_B (out x r, float32), by an
// exact SVD in float32. Checks the weight's dtype and r as PEFT does (InvalidArgument, naming
// `module`). With `check_only` (placeholder weights, which the main process's values replace) it
// checks and returns an undefined tensor.
at::Tensor minor_components(const std::string& module, const at::Tensor& matrix, int64_t r, bool check_only);

struct WeightDecomposition {
  at::Tensor a, b;      // lora_A (r x in) and lora_B (out x r), float32
  at::Tensor residual;  // what the layer's weight becomes, in W's dtype: W - (scaling * B) @ A (LoftQ's: quantised W)
};
// On a process whose weights are placeholders (cpu_ram_efficient_loading: the main process's
// residual weights and adapters arrive when the model is prepared): the checks and random draws
// decompose_weight would take, so that every process refuses alike and the global stream stays in
// step with the main process's.
void skip_decomposition(const std::string& init, const std::string& module, const at::Tensor& weight, int64_t r);

// PEFT's orthogonal_init: the rows of a random r x r orthogonal matrix Q (the QR of a Gaussian draw)
// split into odd and even ones, lora_A = (randn(in, r/2) Q[0::2])^T / 10 and lora_B = randn(r/2, out)^T
// Q[1::2] / 10 (float32): neither is zero while B A is, to rounding, so the layer starts as before. r
// must be even (LoraAdapters::add refuses an odd one before any draw, as PEFT's ValueError). Draws
// as PEFT, after the adapters' nn.Linear draws.
std::pair<at::Tensor, at::Tensor> orthogonal_start(int64_t in, int64_t out, int64_t r);

// PEFT's olora_init / pissa_init of a layer (`module`, named in errors) with weight `weight` (out x
// in) for rank r and the adapter's scaling, computed in float32; `weight` is left as it is.
WeightDecomposition decompose_weight(const std::string& init, const std::string& module, const at::Tensor& weight,
                                     int64_t r, double scaling);

}  // namespace acc

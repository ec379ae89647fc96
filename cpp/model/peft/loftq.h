// LoftQ (Li et al. 2023, "LoftQ: LoRA-Fine-Tuning-Aware Quantization"), PEFT's loftq_init for a
// model it is given unquantised: a linear layer's weight becomes its quantised approximation Q, kept
// dequantised (bitsandbytes' NF4 in blocks of 64, or its row-wise int8 through float16), and the
// adapters start from the largest singular vectors of the quantisation error, B A ~ W - Q. With
// several rounds, each quantises W - B A of the round before.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

#include "model/peft/lora_config.h"
#include "model/peft/lora_init.h"

namespace acc {

// bitsandbytes' quantize_4bit and dequantize_4bit (NF4, blocks of 64 of the flattened tensor, each
// scaled by its absolute maximum) as its PyTorch implementation computes them: the float32 values a
// 4-bit weight stands for. (Its CUDA kernel takes the same buckets but for values within a rounding
// of a bucket's edge.)
at::Tensor nf4_round_trip(const at::Tensor& weight);
// bitsandbytes' Int8Params quantisation and int8_vectorwise_dequant: the weight in float16, each row
// scaled by 127 over its absolute maximum and rounded to int8, and back, in float32.
at::Tensor int8_round_trip(const at::Tensor& weight);

// Fails (InvalidArgument, naming `module`) unless LoftQ can start an adapter of rank r on a linear
// layer's `weight` (out x in): a floating-point weight and r at most min(out, in). Reads no values
// (placeholder weights pass).
void check_loftq(const std::string& module, const at::Tensor& weight, int64_t r);

// PEFT's loftq_init of `weight` (out x in), computed in float32 on the weight's device, with
// `config` as the options and files check it (bits 4 or 8, at least one round): A = R (r x
// in) and B = L (out x r) of the last round's error W - Q = L R (torch.linalg.svd, L = U sqrt(S),
// R = sqrt(S) Vh, truncated to r), and Q in the weight's dtype as `residual`. Weights holding inf or
// NaN, or beyond float16's range for 8 bits, are InvalidArgument.
WeightDecomposition loftq_start(const std::string& module, const at::Tensor& weight, int64_t r,
                                const LoftqConfig& config);

// PEFT's _loftq_init_new, what replace_lora_weights_loftq starts a 4-bit layer's adapters from: the
// unquantised `weight` (out x in, any floating dtype) in float32 minus the layer's `dequantized`
// weight, factored as loftq_start's last round (A = R, B = L, float32, rank r).
std::pair<at::Tensor, at::Tensor> loftq_replacement(const at::Tensor& weight, const at::Tensor& dequantized, int64_t r);

}  // namespace acc

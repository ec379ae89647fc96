// bitsandbytes' blockwise 8-bit quantisation with its dynamic codes (create_dynamic_map), as its
// CPU library computes it: what double quantisation stores a 4-bit weight's block maxima in
// (model/four_bit.h) and what its 8-bit optimizers store their moments in (optim/bnb_8bit.h).
// Each block of 256 values is divided by its absolute maximum and mapped to the nearest of 256
// codes through a 65536-point table over [-1, 1].
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace acc {

constexpr int64_t kBlockwiseBlock = 256;  // bitsandbytes' blocksize for both uses
// The blocks `n` values take (the last one may be short).
constexpr int64_t blockwise_blocks(int64_t n) { return (n + kBlockwiseBlock - 1) / kBlockwiseBlock; }

// create_dynamic_map(signed): signed, for each i in 0..6 the midpoints of linspace(0.1, 1, 2^i + 1)
// times +-10^(i-6); unsigned, of linspace(0.1, 1, 2^(i+1) + 1) times 10^(i-6) alone; then 0 and 1,
// sorted (256 values).
const std::vector<float>& dynamic_code(bool is_signed);
at::Tensor dynamic_code_tensor(bool is_signed, const at::Device& device);

// quantize_blockwise of float32 `values` (any shape, flattened) with the dynamic code: the codes
// (uint8, `values`' shape) and each block's maximum (float32); a block of zeros takes code 0. On
// `values`' device: on the CPU the library's loop, elsewhere the same float operations as tensor
// operations (quantize_blockwise_ops), which give the same codes.
std::pair<at::Tensor, at::Tensor> quantize_blockwise(const at::Tensor& values, bool is_signed);
std::pair<at::Tensor, at::Tensor> quantize_blockwise_loop(const at::Tensor& values, bool is_signed);  // CPU
std::pair<at::Tensor, at::Tensor> quantize_blockwise_ops(const at::Tensor& values, bool is_signed);
// dequantize_blockwise: code value times its block's maximum, in float32, in `codes`' shape.
at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code);

}  // namespace acc

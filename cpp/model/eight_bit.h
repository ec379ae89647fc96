// bitsandbytes' LLM.int8 arithmetic (Int8Params, int8_vectorwise_quant, int8_scaled_mm and
// int8_mm_dequant), as bitsandbytes 0.50's PyTorch implementations compute it: a weight row by row
// in float16, each row scaled by its absolute maximum to int8 codes in [-127, 127]; a product of
// two such matrices in exact int32 arithmetic, scaled back by both rows' maxima.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace acc {

// A matrix quantised row by row (int8_vectorwise_quant): codes = round(row * 127 / max|row|).
struct Int8Rows {
  at::Tensor codes;   // int8, the matrix's shape
  at::Tensor scales;  // float32 per row: max|row| (in float16, as quantised)
  // With a threshold: the columns holding a value at least that large (int64; empty if none).
  std::optional<at::Tensor> outlier_columns;
};

// int8_vectorwise_quant of a 2-D float16 matrix: values of magnitude >= `threshold` (> 0) are left
// out of their rows' maxima and their columns come back as outliers (their codes zeroed where the
// matrix has more than one row). `matrix` is not changed.
Int8Rows int8_rows(const at::Tensor& matrix, double threshold = 0.0);
// int8_vectorwise_dequant: codes * scale * (1 / 127), in float32.
at::Tensor int8_dequantize(const at::Tensor& codes, const at::Tensor& scales);
// A layer's weight as Int8Params quantises it on its device: cast to float16, then int8_rows.
// InvalidArgument, naming `module`, where a value is not finite or beyond float16's range (its row
// would quantise to nothing usable).
Int8Rows quantize_8bit(const std::string& module, const at::Tensor& weight);
// int8_scaled_mm: (a_codes b_codes^T) in int32, times a_scales (rows) and b_scales (columns) and
// 6.200124e-05 in float32, plus `bias`, in `dtype`. The int32 product is exact (as bitsandbytes'
// CUDA and AVX-512 kernels; its plain-CPU fallback multiplies in float32, which rounds once a row
// has more than 1040 terms).
at::Tensor int8_scaled_mm(const at::Tensor& a_codes, const at::Tensor& b_codes, const at::Tensor& a_scales,
                          const at::Tensor& b_scales, const at::Tensor& bias, at::ScalarType dtype);

}  // namespace acc

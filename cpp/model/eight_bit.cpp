#include "model/eight_bit.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "common/error.h"

namespace acc {

Int8Rows int8_rows(const at::Tensor& matrix, double threshold) {
  at::NoGradGuard no_grad;
  // bitsandbytes zeroes the outliers in place and restores them after; a copy leaves `matrix` alone.
  const at::Tensor a = matrix.clone();
  Int8Rows out;
  if (threshold > 0) {
    const at::Tensor outliers = a.abs() >= threshold;
    if (outliers.any().item<bool>()) {
      out.outlier_columns = at::argwhere(outliers.any(0)).view(-1);
      a.masked_fill_(outliers, 0);
    } else {
      out.outlier_columns = at::empty({0}, a.options().dtype(at::kLong));
    }
  }
  out.scales = std::get<0>(a.abs().max(1)).to(at::kFloat);
  // 127.0 / row_stats is Python's reflected division: reciprocal(row_stats) * 127.
  out.codes = at::round(a * (out.scales.unsqueeze(-1).reciprocal() * 127.0)).to(at::kChar);
  if (a.size(0) > 1 && out.outlier_columns && out.outlier_columns->numel() > 0)
    out.codes.index_fill_(1, *out.outlier_columns, 0);
  return out;
}

at::Tensor int8_dequantize(const at::Tensor& codes, const at::Tensor& scales) {
  return codes * scales.view({-1, 1}) * 7.874015718698502e-3;
}

Int8Rows quantize_8bit(const std::string& module, const at::Tensor& weight) {
  require(weight.dim() == 2 && weight.numel() > 0 && weight.is_floating_point(), "the weight of '", module,
          "' is not a non-empty floating-point matrix, which LLM.int8 quantises");
  const at::Tensor half = weight.detach().contiguous().to(at::kHalf);
  require(half.isfinite().all().item<bool>(), "the weight of '", module, "' holds inf, NaN or values beyond ",
          "float16's range (65504): LLM.int8 quantises it in float16, where such a row has no usable scale");
  return int8_rows(half);
}

at::Tensor int8_scaled_mm(const at::Tensor& a_codes, const at::Tensor& b_codes, const at::Tensor& a_scales,
                          const at::Tensor& b_scales, const at::Tensor& bias, at::ScalarType dtype) {
  // Every partial sum of up to 1040 products of codes in [-127, 127] is below 2^24: exact in float32
  // (autocast left out, which would round it to 16 bits).
  const at::ScalarType exact = a_codes.size(-1) <= 1040 ? at::kFloat : at::kDouble;
  at::Tensor product;
  {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    product = at::matmul(a_codes.to(exact), b_codes.to(exact).t()).to(at::kInt);
  }
  // int8_mm_dequant's arithmetic, in its order.
  at::Tensor out = product.view({-1, product.size(-1)}) *
                   (a_scales.reshape(-1).unsqueeze(-1) * b_scales.reshape(-1).unsqueeze(0)) * 6.200124e-05;
  if (bias.defined()) out += bias;
  return out.to(dtype);
}

}  // namespace acc

#include "model/peft/loftq.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <tuple>

#include "common/error.h"
#include "model/eight_bit.h"
#include "model/four_bit.h"

namespace acc {
namespace {

constexpr float kFloat16Overflow = 65520.0f;  // the smallest magnitude float16 rounds to inf

// torch.linalg.svd's factors split as PEFT's _low_rank_decomposition: L = U sqrt(diag(S))[:, :r],
// R = sqrt(diag(S))[:r, :] Vh (products with the diagonal matrices, as PEFT computes them).
std::pair<at::Tensor, at::Tensor> low_rank_factors(const at::Tensor& matrix, int64_t r) {
  auto [u, s, vh] = at::linalg_svd(matrix, /*full_matrices=*/false);
  const at::Tensor diagonal = at::diag(s);
  return {u.matmul(at::sqrt(diagonal.slice(1, 0, r))), at::sqrt(diagonal.slice(0, 0, r)).matmul(vh)};
}

}  // namespace

at::Tensor nf4_round_trip(const at::Tensor& weight) { return four_bit_round_trip(weight, FourBitType::Nf4); }

at::Tensor int8_round_trip(const at::Tensor& weight) {
  const Int8Rows rows = int8_rows(weight.contiguous().to(at::kHalf));
  return int8_dequantize(rows.codes, rows.scales);
}

void check_loftq(const std::string& module, const at::Tensor& weight, int64_t r) {
  const auto dtype = weight.scalar_type();
  require(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble,
          "init_lora_weights 'loftq' quantises '", module, "''s weight, which must be floating-point, not ", dtype);
  require(r <= std::min(weight.size(0), weight.size(1)), "init_lora_weights 'loftq': r ", r, " of '", module,
          "' exceeds its weight's rank bound min(", weight.size(0), ", ", weight.size(1), ")");
}

WeightDecomposition loftq_start(const std::string& module, const at::Tensor& weight, int64_t r,
                                const LoftqConfig& config) {
  check_loftq(module, weight, r);
  at::NoGradGuard no_grad;
  const at::Tensor w = weight.detach().to(at::kFloat);
  require(w.isfinite().all().item<bool>(), "init_lora_weights 'loftq' cannot quantise '", module,
          "': its weight holds inf or NaN");
  at::Tensor res = w.clone(), quantised, l, rr;
  for (int64_t round = 0; round < config.iter; ++round) {
    if (config.bits == 8)
      require(res.abs().max().item<float>() < kFloat16Overflow, "init_lora_weights 'loftq' with 8 bits cannot ",
              "quantise '", module, "': it exceeds float16's range, through which bitsandbytes' int8 goes");
    quantised = config.bits == 4 ? nf4_round_trip(res) : int8_round_trip(res);
    res = w - quantised;
    std::tie(l, rr) = low_rank_factors(res, r);
    if (round + 1 == config.iter) break;
    res = w - at::mm(l, rr);
  }
  WeightDecomposition out;
  out.a = rr.contiguous();
  out.b = l.contiguous();
  out.residual = quantised.to(weight.scalar_type());
  return out;
}

std::pair<at::Tensor, at::Tensor> loftq_replacement(const at::Tensor& weight, const at::Tensor& dequantized,
                                                    int64_t r) {
  at::NoGradGuard no_grad;
  auto [l, rr] = low_rank_factors(weight.detach().to(at::kFloat) - dequantized, r);
  return {rr.contiguous(), l.contiguous()};
}

}  // namespace acc

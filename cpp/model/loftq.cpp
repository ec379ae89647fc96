#include "model/loftq.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <tuple>

#include "common/error.h"

namespace acc {
namespace {

constexpr int64_t kNf4Block = 64;             // Params4bit's default blocksize
constexpr float kFloat16Overflow = 65520.0f;  // the smallest magnitude float16 rounds to inf

// bitsandbytes' NF4 code: quantiles of N(0, 1), scaled to [-1, 1], with an exact zero.
at::Tensor nf4_code(const at::Device& device) {
  static const float values[16] = {-1.0f,
                                   -0.6961928009986877f,
                                   -0.5250730514526367f,
                                   -0.39491748809814453f,
                                   -0.28444138169288635f,
                                   -0.18477343022823334f,
                                   -0.09105003625154495f,
                                   0.0f,
                                   0.07958029955625534f,
                                   0.16093020141124725f,
                                   0.24611230194568634f,
                                   0.33791524171829224f,
                                   0.44070982933044434f,
                                   0.5626170039176941f,
                                   0.7229568362236023f,
                                   1.0f};
  return at::tensor(at::ArrayRef<float>(values), at::kFloat).to(device);
}

// torch.linalg.svd's factors split as PEFT's _low_rank_decomposition: L = U sqrt(diag(S))[:, :r],
// R = sqrt(diag(S))[:r, :] Vh (products with the diagonal matrices, as PEFT computes them).
std::pair<at::Tensor, at::Tensor> low_rank_factors(const at::Tensor& matrix, int64_t r) {
  auto [u, s, vh] = at::linalg_svd(matrix, /*full_matrices=*/false);
  const at::Tensor diagonal = at::diag(s);
  return {u.matmul(at::sqrt(diagonal.slice(1, 0, r))), at::sqrt(diagonal.slice(0, 0, r)).matmul(vh)};
}

}  // namespace

at::Tensor nf4_round_trip(const at::Tensor& weight) {
  const at::Tensor flat = weight.reshape(-1).to(at::kFloat);
  const int64_t n = flat.numel(), rem = n % kNf4Block, full = n - rem, blocks = full / kNf4Block;
  const at::Tensor code = nf4_code(flat.device());
  const at::Tensor bounds = (code.slice(0, 0, 15) + code.slice(0, 1, 16)) / 2;
  // Each block scaled by the reciprocal of its absolute maximum (at least 1e-38), the last, shorter
  // one divided by its own, as bitsandbytes' implementation does.
  at::Tensor absmax = at::empty({0}, flat.options()), scaled = at::empty({0}, flat.options());
  if (blocks > 0) {
    const at::Tensor whole = flat.slice(0, 0, full).reshape({blocks, kNf4Block});
    absmax = std::get<0>(whole.abs().max(-1));
    scaled = at::clamp(whole * absmax.clamp_min(1e-38).reciprocal().view({-1, 1}), -1, 1).reshape(-1);
  }
  if (rem > 0) {
    const at::Tensor tail = flat.slice(0, full);
    const at::Tensor tail_max = tail.abs().max().clamp_min(1e-38);
    absmax = at::cat({absmax, tail_max.unsqueeze(0)});
    scaled = at::cat({scaled, at::clamp(tail / tail_max, -1, 1)});
  }
  const at::Tensor q = at::bucketize(scaled, bounds, /*out_int32=*/true, /*right=*/false);
  const at::Tensor values = code.index_select(0, q);
  at::Tensor out = at::empty({n}, flat.options());
  if (blocks > 0) {
    const at::Tensor whole = values.slice(0, 0, full).view({-1, kNf4Block}) * absmax.slice(0, 0, blocks).view({-1, 1});
    out.slice(0, 0, full).copy_(whole.reshape(full));
  }
  if (rem > 0) out.slice(0, full).copy_(values.slice(0, full) * absmax[blocks]);
  return out.reshape(weight.sizes());
}

at::Tensor int8_round_trip(const at::Tensor& weight) {
  const at::Tensor half = weight.contiguous().to(at::kHalf);
  const at::Tensor stats = std::get<0>(half.abs().max(1)).to(at::kFloat);
  // Python's 127.0 / stats is stats.reciprocal() * 127.0 (C++'s would divide).
  const at::Tensor q = at::round(half * (stats.unsqueeze(-1).reciprocal() * 127.0)).to(at::kChar);
  return q * stats.view({-1, 1}) * 7.874015718698502e-3;
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

}  // namespace acc

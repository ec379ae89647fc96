#include "model/peft/lora_ga.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/peft/svd_lowrank.h"

namespace acc {

void require_lora_ga_rank(const std::string& module, int64_t out, int64_t in, int64_t r) {
  require(2 * r <= std::min(out, in), "init_lora_weights lora_ga takes 2 r singular vectors of the gradient: r ", r,
          " of '", module, "' exceeds half its weight's smaller size (", out, " x ", in, ")");
}

WeightDecomposition lora_ga_start(const std::string& module, const at::Tensor& weight, const at::Tensor& gradient,
                                  int64_t stored_rows, int64_t r, double scaling, const LoraGaConfig& config) {
  at::NoGradGuard no_grad;
  const auto dtype = weight.scalar_type();
  require(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, "init_lora_weights lora_ga on '", module,
          "': the weight must be float32, float16 or bfloat16, not ", dtype);
  require_lora_ga_rank(module, weight.size(0), weight.size(1), r);
  const at::Tensor grad = gradient.to(at::kFloat);
  // PEFT's SVD would fail on it ("failed to converge") without naming the layer.
  require(grad.isfinite().all().item<bool>(), "init_lora_weights lora_ga on '", module,
          "': the gradient estimated over the backward passes holds inf or NaN (a diverged loss?)");
  auto [u, s, v] = svd_lowrank(grad, std::min<int64_t>(4 * r, std::min(grad.size(0), grad.size(1))), 4);
  const at::Tensor vh = v.t().slice(0, 0, 2 * r);
  u = u.slice(1, 0, 2 * r);
  s = s.slice(0, 0, 2 * r);
  at::Tensor a, b, s_b;
  if (config.direction == "ArBr") {  // A the odd components, B the even ones
    a = vh.slice(0, 1, 2 * r, 2);
    s_b = s.slice(0, 0, 2 * r, 2);
    b = u.slice(1, 0, 2 * r, 2).matmul(at::diag(s_b));
  } else if (config.direction == "A2rBr") {
    a = vh.slice(0, r, 2 * r);
    s_b = s.slice(0, 0, r);
    b = u.slice(1, 0, r).matmul(at::diag(s_b));
  } else if (config.direction == "ArB2r") {
    a = vh.slice(0, 0, r);
    s_b = s.slice(0, r, 2 * r);
    b = u.slice(1, r, 2 * r).matmul(at::diag(s_b));
  } else {  // "random": r of the 2 r, by torch.randperm from the global generator
    const at::Tensor indices = at::randperm(2 * r, at::kLong).slice(0, 0, r);
    a = vh.index_select(0, indices.to(vh.device()));
    s_b = s.index_select(0, indices.to(s.device()));
    b = u.index_select(1, indices.to(u.device())).matmul(at::diag(s_b));
  }
  if (config.scale == "stable") {
    b = b * (std::pow(static_cast<double>(stored_rows), 0.25) / std::pow(static_cast<double>(config.stable_gamma), 0.5));
  } else if (config.scale == "weight_svd") {
    const at::Tensor weight_s = std::get<1>(svd_lowrank(weight.detach().to(at::kFloat), r, 4));
    if (s_b[0].item<double>() > 0) b = b * (weight_s[0] / s_b[0]);
  } else if (config.scale == "gd_scale") {
    a = a / scaling;
    b = b / scaling;
  }
  WeightDecomposition out;
  out.a = a.to(dtype).contiguous();
  out.b = b.to(dtype).contiguous();
  const at::Tensor offset = (out.b.to(at::kFloat).matmul(out.a.to(at::kFloat))) * scaling;
  out.residual = (weight.detach().to(at::kFloat) - offset).to(dtype);
  return out;
}

}  // namespace acc

#include "model/peft/corda.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "common/error.h"

namespace acc {
namespace {

constexpr double kFirstDamping = 0.01;   // PEFT's damp
constexpr double kInverseTolerance = 0.05;  // ||C' C'^-1 - I|| it accepts

bool finite(const at::Tensor& t) { return !(at::isnan(t).any().item<bool>() || at::isinf(t).any().item<bool>()); }

}  // namespace

void CovarianceSum::add(const at::Tensor& input, bool keep_dtype, const std::string& layer) {
  at::NoGradGuard no_grad;
  at::Tensor x = input.detach();
  x = x.dim() > 2 ? x.reshape({-1, x.size(-1)}) : x;
  require(x.dim() == 2, "CorDA: the input of '", layer, "' has ", input.dim(),
          " dimension(s); it needs rows x features");
  if (!keep_dtype) x = x.to(at::kFloat);
  x = x / at::max(x).abs();
  require(finite(x), "CorDA: the input of '", layer, "' holds a NaN or an infinity (or is all zeros)");
  const at::Tensor covariance = x.t().matmul(x);
  require(finite(covariance), "CorDA: the covariance of the inputs of '", layer, "' overflows");
  sum_ = sum_.defined() ? sum_ + covariance : covariance + 0;  // PEFT's 0 + covariance first
  ++calls_;
}

at::Tensor CovarianceSum::covariance() const { return sum_ / calls_; }

CordaComponents corda_components(const at::Tensor& weight, const at::Tensor& covariance, int64_t r,
                                 const std::string& method) {
  at::NoGradGuard no_grad;
  at::Tensor w = weight.detach().to(at::kFloat);
  const at::Tensor c = covariance.to(at::kFloat);
  const int64_t n = c.size(0);
  const at::Tensor identity = at::eye(n, c.options());
  double damp = kFirstDamping;
  at::Tensor fixed, inverse;
  for (;;) {
    const at::Tensor compensate = at::diag(at::ones({n}, c.options()) * at::mean(at::diag(c)) * damp);
    fixed = c + compensate;
    inverse = at::linalg_inv(fixed);
    const double error = at::dist(fixed.matmul(inverse), identity).item<double>();
    if (error < kInverseTolerance) break;
    require(std::isfinite(error) && damp < 1e30, "CorDA: the inputs' covariance cannot be inverted (damped up to ",
            damp, "); give more varied data");
    damp *= 2;
  }
  w = w.matmul(fixed);
  auto [u, s, vh] = at::linalg_svd(w, /*full_matrices=*/false);
  const at::Tensor v = vh.matmul(inverse).transpose(0, 1);
  const int64_t k = s.size(0);
  require(r <= k, "CorDA: r ", r, " exceeds the ", k, " components of a ", weight.size(0), " x ", weight.size(1),
          " weight");
  const int64_t from = method == "kpm" ? k - r : 0;
  return {s.slice(0, from, from + r).clone(), u.slice(1, from, from + r).clone(), v.slice(1, from, from + r).clone()};
}

WeightDecomposition corda_start(const std::string& module, const at::Tensor& weight,
                                const CordaComponents& components, double scaling) {
  at::NoGradGuard no_grad;
  const auto dtype = weight.scalar_type();
  require(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, "init_lora_weights corda decomposes '",
          module, "''s weight, which must be float32, float16 or bfloat16, not ", dtype);
  require(finite(components.s) && finite(components.u) && finite(components.v), "CorDA: the components of '", module,
          "' hold a NaN or an infinity");
  const at::Tensor w = weight.detach().to(at::kFloat);
  const at::Tensor s = components.s / scaling;
  WeightDecomposition out;
  out.a = components.v.t().mul(s.sqrt().view({-1, 1})).contiguous();
  out.b = components.u.mul(s.sqrt()).contiguous();
  out.residual = (w - (out.b * scaling).matmul(out.a)).to(weight.scalar_type());
  return out;
}

}  // namespace acc

#include "model/peft/lora_init.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "common/text.h"
#include "model/peft/loftq.h"
#include "model/peft/svd_lowrank.h"

namespace acc {
namespace {

constexpr const char* kNiterPrefix = "pissa_niter_";
constexpr int64_t kMaxNiter = 1000;  // subspace iterations; PEFT's examples use 4 to 16

// The n of "pissa_niter_<n>" (-1 for anything else).
int64_t pissa_niter(const std::string& init) {
  const std::string prefix = kNiterPrefix;
  if (init.compare(0, prefix.size(), prefix) != 0) return -1;
  const auto n = parse_integer(init.substr(prefix.size()));
  return n && *n >= 0 && *n <= kMaxNiter ? *n : -1;
}

}  // namespace

bool decomposes_weight(const std::string& init) {
  return init == "olora" || init == "pissa" || init == "corda" || init == "lora_ga" || init == "loftq" ||
         pissa_niter(init) >= 0;
}

void check_lora_init(const std::string& init) {
  if (init == "true" || init == "false" || init == "gaussian" || init == "mica" || init == "orthogonal" ||
      init == "eva" || decomposes_weight(init))
    return;
  fail(Status::InvalidArgument, "init_lora_weights '", init,
       "' is not one of true, false, gaussian, mica, orthogonal, eva, olora, pissa, pissa_niter_<n> (n from 0 to ",
       kMaxNiter, "), corda, lora_ga and loftq");
}

namespace {

void check_decomposable(const std::string& init, const std::string& module, const at::Tensor& weight, int64_t r) {
  const auto dtype = weight.scalar_type();
  // As PEFT's olora_init and pissa_init refuse other dtypes.
  require(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, "init_lora_weights '", init,
          "' decomposes '", module, "''s weight, which must be float32, float16 or bfloat16, not ", dtype);
  require(r <= std::min(weight.size(0), weight.size(1)), "init_lora_weights '", init, "': r ", r, " of '", module,
          "' exceeds its weight's rank bound min(", weight.size(0), ", ", weight.size(1), ")");
}

}  // namespace

at::Tensor minor_components(const std::string& module, const at::Tensor& matrix, int64_t r, bool check_only) {
  check_decomposable("mica", module, matrix, r);
  if (check_only) return at::Tensor();
  at::NoGradGuard no_grad;
  const at::Tensor u = std::get<0>(at::linalg_svd(matrix.detach().to(at::kFloat), /*full_matrices=*/false));
  return u.slice(1, u.size(1) - r).contiguous();
}

std::pair<at::Tensor, at::Tensor> orthogonal_start(int64_t in, int64_t out, int64_t r) {
  at::NoGradGuard no_grad;
  const at::Tensor q = std::get<0>(at::linalg_qr(at::randn({r, r}, at::kFloat)));
  const at::Tensor odd = q.slice(0, 0, r, 2), even = q.slice(0, 1, r, 2);
  const at::Tensor a = at::randn({in, r / 2}, at::kFloat).mm(odd).t() / 10.0;
  const at::Tensor b = at::randn({r / 2, out}, at::kFloat).t().mm(even) / 10.0;
  return {a.contiguous(), b.contiguous()};
}

void skip_decomposition(const std::string& init, const std::string& module, const at::Tensor& weight, int64_t r) {
  if (init == "loftq") return check_loftq(module, weight, r);
  check_decomposable(init, module, weight, r);
  // svd_lowrank's Gaussian start: (the shorter side) x r.
  if (pissa_niter(init) >= 0) (void)at::randn({std::min(weight.size(0), weight.size(1)), r}, at::kFloat);
}

WeightDecomposition decompose_weight(const std::string& init, const std::string& module, const at::Tensor& weight,
                                     int64_t r, double scaling) {
  check_decomposable(init, module, weight, r);
  const auto dtype = weight.scalar_type();
  at::NoGradGuard no_grad;
  const at::Tensor w = weight.detach().to(at::kFloat);
  WeightDecomposition out;
  if (init == "olora") {
    // W = Q R: B the first r columns of Q, A the first r rows of R.
    auto [q, rr] = at::linalg_qr(w);
    out.b = q.slice(1, 0, r).contiguous();
    out.a = rr.slice(0, 0, r).contiguous();
  } else {
    // W = V S U^T: B = V_r sqrt(S_r / scaling), A = sqrt(S_r / scaling) U_r^T.
    at::Tensor v_r, s_r, uh_r;
    const int64_t niter = pissa_niter(init);
    if (niter < 0) {
      auto [v, s, uh] = at::linalg_svd(w, /*full_matrices=*/false);
      v_r = v.slice(1, 0, r);
      s_r = s.slice(0, 0, r);
      uh_r = uh.slice(0, 0, r);
    } else {
      auto [v, s, u] = svd_lowrank(w, r, niter);
      v_r = v;
      s_r = s;
      uh_r = u.t();
    }
    s_r = s_r / scaling;
    out.a = at::diag(at::sqrt(s_r)).matmul(uh_r);
    out.b = v_r.matmul(at::diag(at::sqrt(s_r)));
  }
  // PEFT's W - scaling * B @ A: the scaling multiplies B first.
  out.residual = (w - (out.b * scaling).matmul(out.a)).to(dtype);
  return out;
}

}  // namespace acc

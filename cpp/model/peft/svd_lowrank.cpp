#include "model/peft/svd_lowrank.h"

#include <utility>

namespace acc {
namespace {

at::Tensor transposed(const at::Tensor& t) { return t.transpose(-2, -1); }  // mH of a real matrix
at::Tensor qr_q(const at::Tensor& x) { return std::get<0>(at::linalg_qr(x)); }

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_lowrank(const at::Tensor& matrix, int64_t q, int64_t niter) {
  const bool wide = matrix.size(0) < matrix.size(1);
  const at::Tensor a = wide ? transposed(matrix) : matrix;
  const at::Tensor start = at::randn({a.size(-1), q}, a.options());
  at::Tensor basis = qr_q(at::matmul(a, start));
  for (int64_t i = 0; i < niter; ++i) {
    basis = qr_q(at::matmul(transposed(a), basis));
    basis = qr_q(at::matmul(a, basis));
  }
  const at::Tensor projected = at::matmul(transposed(basis), a);
  auto [u, s, vh] = at::linalg_svd(projected, /*full_matrices=*/false);
  at::Tensor v = transposed(vh);
  u = basis.matmul(u);
  if (wide) std::swap(u, v);
  return {u, s, v};
}

}  // namespace acc

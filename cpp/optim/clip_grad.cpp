#include "optim/clip_grad.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <limits>
#include <utility>

namespace acc {
namespace {

// torch groups tensors by (device, dtype) for its foreach kernels; kept in order of first appearance.
std::vector<std::vector<at::Tensor>> by_device_and_dtype(const std::vector<at::Tensor>& tensors) {
  std::vector<std::pair<std::pair<c10::Device, at::ScalarType>, std::vector<at::Tensor>>> groups;
  for (const auto& t : tensors) {
    const auto key = std::make_pair(t.device(), t.scalar_type());
    auto it = groups.begin();
    while (it != groups.end() && it->first != key) ++it;
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(t);
  }
  std::vector<std::vector<at::Tensor>> out;
  for (auto& group : groups) out.push_back(std::move(group.second));
  return out;
}

}  // namespace

double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm, double norm_type) {
  if (grads.empty()) return 0.0;
  return clip_grad_norm(grads, max_norm, norm_type, nullptr);
}

double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm, double norm_type,
                      const std::function<at::Tensor(const at::Tensor&)>& global_total) {
  at::NoGradGuard no_grad;
  const auto groups = by_device_and_dtype(grads);
  std::vector<at::Tensor> norms;
  for (const auto& group : groups)
    for (auto& norm : at::_foreach_norm(group, norm_type)) norms.push_back(norm.to(grads.front().device()));
  at::Tensor total = norms.empty() ? at::zeros({}, at::kFloat) : at::linalg_vector_norm(at::stack(norms), norm_type);
  if (global_total) total = global_total(total);
  // Python's max_norm / (total + 1e-6) is Tensor.__rtruediv__: reciprocal, then a product.
  const at::Tensor coef = at::reciprocal(total + 1e-6).mul(max_norm).clamp_max(1.0);
  for (const auto& group : groups) {
    // torch multiplies by the coefficient tensor, which takes the gradients' dtype first.
    const double factor = coef.to(group.front().scalar_type()).item<double>();
    at::_foreach_mul_(group, factor);
  }
  return total.item<double>();
}

void clip_grad_value(const std::vector<at::Tensor>& grads, double clip_value) {
  at::NoGradGuard no_grad;
  for (const auto& g : grads) {
    // A bound past the dtype's largest value clips nothing (as +inf would); ATen refuses to convert it.
    const bool beyond = AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "clip_grad_value", [&] {
      return clip_value >= static_cast<double>(std::numeric_limits<scalar_t>::max());
    });
    if (!beyond) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace acc

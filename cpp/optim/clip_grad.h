// torch.nn.utils.clip_grad_norm_ and clip_grad_value_, operation for operation (what Accelerate's
// clip_grad_norm_ / clip_grad_value_ call once the gradients are unscaled).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace acc {

// Scales `grads` in place so that their joint norm of type `norm_type` (p > 0, or infinity) is at
// most `max_norm`, and returns that norm before clipping, as torch computes both: per-tensor norms
// (torch._foreach_norm) for each device and dtype, their norm, clip_coef = 1 / (total + 1e-6) *
// max_norm clamped to 1, then every gradient multiplied by it (also when it is 1), all in the
// gradients' dtype.
double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm, double norm_type);
// The same over gradients split across processes: `global_total` turns this process's total norm (a
// 0-dim tensor; 0 when it has no gradients) into the total over every process's.
double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm, double norm_type,
                      const std::function<at::Tensor(const at::Tensor&)>& global_total);

// Clamps every gradient to [-clip_value, clip_value].
void clip_grad_value(const std::vector<at::Tensor>& grads, double clip_value);

}  // namespace acc

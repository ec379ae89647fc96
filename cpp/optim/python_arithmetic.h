// Where torch.optim's Python rules of 1.x and 2.x round differently, the rounding of the PyTorch
// version built against (compat::kPythonOptimizers2), for the rules written here op for op.
#pragma once

#include <ATen/ATen.h>

#include <cmath>

#include "common/compat.h"

namespace acc {

// avg <- keep * avg + (1 - keep) * value: 2.x lerp_s, 1.x multiplied and added.
inline void update_average(const at::Tensor& avg, const at::Tensor& value, double keep) {
  if constexpr (compat::kPythonOptimizers2)
    avg.lerp_(value, 1 - keep);
  else
    avg.mul_(keep).add_(value, 1 - keep);
}

// 2.x's x ** 0.5 or 1.x's math.sqrt(x): libm's pow and sqrt may round apart.
inline double python_sqrt(double x) { return compat::kPythonOptimizers2 ? std::pow(x, 0.5) : std::sqrt(x); }

}  // namespace acc

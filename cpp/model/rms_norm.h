// Root-mean-square layer normalisation (Zhang & Sennrich 2019) as PyTorch 2.4's nn.RMSNorm:
// x / sqrt(mean(x^2 over the normalized dims) + eps) * weight, eps by default the machine epsilon
// of the input's dtype, weight named `weight` and initialised to ones.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <vector>

#include "model/layer_kind.h"

namespace acc {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(std::vector<int64_t> normalized_shape, std::optional<double> eps, bool elementwise_affine);
  at::Tensor forward(const at::Tensor& x);

  std::vector<int64_t> normalized_shape;
  std::optional<double> eps;
  at::Tensor weight;  // undefined without elementwise_affine
};
TORCH_MODULE(RMSNorm);

LayerKind rmsnorm_kind();

}  // namespace acc

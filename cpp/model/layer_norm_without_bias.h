// PyTorch 2.1's nn.LayerNorm(bias=False), which libtorch 1.13's LayerNorm cannot build: the weight
// alone, the bias neither a parameter nor read by the forward (an undefined tensor there).
#pragma once

#include <torch/nn/modules/normalization.h>

#include <string>

namespace acc {

// A module's parameter list is protected: reached through a member pointer, never an object of this type.
struct ParameterRemover : torch::nn::Module {
  static void remove(torch::nn::Module& module, const std::string& name) {
    (module.*(&ParameterRemover::parameters_)).erase(name);
  }
};

inline void without_bias(torch::nn::LayerNormImpl& norm) {
  if (!norm.bias.defined()) return;
  norm.bias = at::Tensor();
  ParameterRemover::remove(norm, "bias");
}

}  // namespace acc

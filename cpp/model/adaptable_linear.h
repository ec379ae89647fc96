// torch::nn::Linear whose output an adapter may amend: LoRA's B(A(dropout(x))) * scaling as PEFT
// adds it (model/peft/lora.h). The layers of a spec model use it wherever PyTorch uses nn.Linear, so
// parameters, names, initialisation and arithmetic are Linear's while no adapter is set.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <utility>

#include "model/output_adapter.h"

namespace acc {

class AdaptableLinearImpl : public torch::nn::LinearImpl, public OutputAdaptable {
 public:
  using torch::nn::LinearImpl::LinearImpl;

  at::Tensor forward(const at::Tensor& input) {
    // at::linear, as Python's F.linear: libtorch's C++ Linear multiplies then adds the bias for
    // inputs of 3+ dimensions, where at::linear fuses them (one rounding in bf16, another order).
    at::Tensor output = at::linear(adapted_input(input, is_training()), weight, bias);
    return adapted(input, output, is_training());
  }
};
TORCH_MODULE(AdaptableLinear);

}  // namespace acc

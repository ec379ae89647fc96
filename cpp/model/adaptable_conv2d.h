// torch::nn::Conv2d whose output an adapter may amend: LoRA's lora_B(lora_A(dropout(x))) * scaling as
// PEFT's Conv2d adds it (model/peft/lora.h). A spec model's "conv2d" layers are these, so parameters,
// names, initialisation and arithmetic are Conv2d's while no adapter is set.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/output_adapter.h"

namespace acc {

class AdaptableConv2dImpl : public torch::nn::Conv2dImpl, public OutputAdaptable {
 public:
  // `padding`: the options' padding as numbers (the options hold it as a variant with "same"/"valid").
  AdaptableConv2dImpl(torch::nn::Conv2dOptions options, std::vector<int64_t> padding)
      : torch::nn::Conv2dImpl(std::move(options)), padding_(std::move(padding)) {}

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor output = torch::nn::Conv2dImpl::forward(adapted_input(input, is_training()));
    return adapted(input, output, is_training());
  }

  std::vector<int64_t> stride() const { return c10::IntArrayRef(options.stride()).vec(); }
  const std::vector<int64_t>& padding() const { return padding_; }
  std::vector<int64_t> dilation() const { return c10::IntArrayRef(options.dilation()).vec(); }
  int64_t groups() const { return options.groups(); }

 private:
  std::vector<int64_t> padding_;
};
TORCH_MODULE(AdaptableConv2d);

}  // namespace acc

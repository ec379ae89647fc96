// torch::nn::Conv2d whose output an adapter may amend: LoRA's lora_B(lora_A(dropout(x))) * scaling as
// PEFT's Conv2d adds it (model/peft/lora.h). A spec model's "conv2d" layers are these, so parameters,
// names, initialisation and arithmetic are Conv2d's while no adapter is set.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/output_adapter.h"

namespace acc {

class AdaptableConv2dImpl : public torch::nn::Conv2dImpl, public OutputAdaptable {
 public:
  // `padding`: the options' padding as numbers (the options hold it as a variant with "same"/"valid";
  // none for "same"). A padding_mode other than "zeros" pads the input by `mode_pads` (F.pad's
  // order) as nn.Conv2d's _conv_forward does, the options then padding nothing (libtorch 1.13's own
  // padding of a "same" layer in such a mode puts the dimensions' pads the wrong way round).
  AdaptableConv2dImpl(torch::nn::Conv2dOptions options, std::vector<int64_t> padding,
                      std::string padding_mode = "zeros", std::vector<int64_t> mode_pads = {})
      : torch::nn::Conv2dImpl(std::move(options)),
        padding_(std::move(padding)),
        padding_mode_(std::move(padding_mode)),
        mode_pads_(std::move(mode_pads)) {}

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = adapted_input(input, is_training());
    if (padding_mode_ != "zeros") x = at::pad(x, mode_pads_, padding_mode_);
    at::Tensor output = torch::nn::Conv2dImpl::forward(x);
    return adapted(input, output, is_training());
  }

  std::vector<int64_t> stride() const { return c10::IntArrayRef(options.stride()).vec(); }
  const std::vector<int64_t>& padding() const { return padding_; }
  std::vector<int64_t> dilation() const { return c10::IntArrayRef(options.dilation()).vec(); }
  int64_t groups() const { return options.groups(); }
  const std::string& padding_mode() const { return padding_mode_; }

 private:
  std::vector<int64_t> padding_;
  std::string padding_mode_;
  std::vector<int64_t> mode_pads_;
};
TORCH_MODULE(AdaptableConv2d);

}  // namespace acc

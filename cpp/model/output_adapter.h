// A change to a layer's output computed from its input (a LoRA adapter's B(A(dropout(x))) * scaling
// added, model/lora.h), set on layers that take one (model/adaptable_linear.h).
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace acc {

// The layer's input and output, and whether it is in training mode, to the amended output.
using OutputAdapter = std::function<at::Tensor(const at::Tensor& input, const at::Tensor& output, bool training)>;

}  // namespace acc

// A change to a layer's output computed from its input (a LoRA adapter's B(A(dropout(x))) * scaling
// added, model/lora.h), set on layers that take one (model/adaptable_linear.h, adaptable_conv2d.h,
// adaptable_embedding.h).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <utility>

namespace acc {

// The layer's input and output, and whether it is in training mode, to the amended output.
using OutputAdapter = std::function<at::Tensor(const at::Tensor& input, const at::Tensor& output, bool training)>;

// What a libtorch layer gains by also deriving from this: an adapter its forward runs on its output.
class OutputAdaptable {
 public:
  virtual ~OutputAdaptable() = default;
  // An empty adapter removes it.
  void set_output_adapter(OutputAdapter adapter) { adapter_ = std::move(adapter); }
  bool has_output_adapter() const { return static_cast<bool>(adapter_); }

 protected:
  at::Tensor adapted(const at::Tensor& input, const at::Tensor& output, bool training) const {
    return adapter_ ? adapter_(input, output, training) : output;
  }

 private:
  OutputAdapter adapter_;
};

}  // namespace acc

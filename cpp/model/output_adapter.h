// A change to a layer's output computed from its input (a LoRA adapter's B(A(dropout(x))) * scaling
// added, model/peft/lora.h), set on layers that take one (model/adaptable_linear.h, adaptable_conv2d.h,
// adaptable_embedding.h).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <utility>

namespace acc {

// The layer's input and output, and whether it is in training mode, to the amended output.
using OutputAdapter = std::function<at::Tensor(const at::Tensor& input, const at::Tensor& output, bool training)>;
// The layer's input, and whether it is in training mode, to what the layer computes with instead
// ((IA)^3's scaled input, model/peft/ia3.h; OFT's and BOFT's rotated one).
using InputAdapter = std::function<at::Tensor(const at::Tensor& input, bool training)>;

// What a libtorch layer gains by also deriving from this: an adapter its forward runs on its output,
// and (a linear layer's or convolution's) one it runs on its input first.
class OutputAdaptable {
 public:
  virtual ~OutputAdaptable() = default;
  // An empty adapter removes it.
  void set_output_adapter(OutputAdapter adapter) { adapter_ = std::move(adapter); }
  bool has_output_adapter() const { return static_cast<bool>(adapter_); }
  void set_input_adapter(InputAdapter adapter) { input_adapter_ = std::move(adapter); }

 protected:
  // `input` is the layer's own (the output adapter gets it too, not the adapted one).
  at::Tensor adapted(const at::Tensor& input, const at::Tensor& output, bool training) const {
    return adapter_ ? adapter_(input, output, training) : output;
  }
  at::Tensor adapted_input(const at::Tensor& input, bool training) const {
    return input_adapter_ ? input_adapter_(input, training) : input;
  }

 private:
  OutputAdapter adapter_;
  InputAdapter input_adapter_;
};

}  // namespace acc

#include "model/four_bit_linear.h"

#include <ATen/core/grad_mode.h>

#include "common/error.h"
#include "model/quantized_backward.h"

namespace acc {
namespace {

// MatMul4Bit.backward: the weight dequantised to its own dtype, then to the gradient's.
struct FourBitLinearBackward : QuantizedLinearBackward {
  std::shared_ptr<FourBitWeight> weight;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const at::Tensor& grad = grads[0];
    torch::autograd::variable_list out(2);
    if (!grad.defined()) return out;
    if (should_compute_output(0))
      out[0] = at::matmul(grad, dequantize_4bit(*weight, weight->dtype).to(grad.scalar_type()));
    if (should_compute_output(1)) out[1] = bias_gradient(grad);
    return out;
  }
  void release_variables() override { weight.reset(); }
};

}  // namespace

at::Tensor FourBitLinear::linear(const at::Tensor& x, const at::Tensor& layer_bias, bool with_bias, bool) const {
  // Linear4bit.forward casts its bias to the compute dtype for good (prepare_model_for_kbit_training
  // makes it float32 before).
  if (layer_bias.defined() && layer_bias.scalar_type() != compute_dtype_) {
    at::NoGradGuard no_grad;
    layer_bias.set_data(layer_bias.to(compute_dtype_));
  }
  const at::ScalarType input_dtype = x.scalar_type();
  const at::Tensor input = x.to(compute_dtype_);
  const at::Tensor bias = with_bias ? layer_bias : at::Tensor();  // in the compute dtype (above)
  at::Tensor output;
  {
    at::NoGradGuard no_history;
    output = at::linear(input, dequantize_4bit(*weight_, compute_dtype_), bias);
  }
  set_quantized_history<FourBitLinearBackward>(output, input, bias,
                                               [&](FourBitLinearBackward& node) { node.weight = weight_; });
  return output.to(input_dtype);
}

void FourBitLinear::add(const std::string& module, const at::Tensor& delta) { add_to_4bit(module, *weight_, delta); }

NamedTensors FourBitLinear::merged_entries(const std::string& module, const at::Tensor& delta) const {
  const FourBitWeight merged = with_delta_4bit(module, *weight_, delta);
  NamedTensors out{{module + ".weight", merged.packed}};
  for (auto& entry : four_bit_state_entries(module + ".weight", merged)) out.push_back(std::move(entry));
  return out;
}

NamedTensors FourBitLinear::state_entries(const std::string& module) const {
  return four_bit_state_entries(module + ".weight", *weight_);
}

bool FourBitLinear::is_state_text(const std::string& module, const std::string& name) const {
  return name == four_bit_state_text_key(module + ".weight", *weight_);
}

void FourBitLinear::check_state(const std::string& module, const NamedTensors& state) const {
  const std::string weight = module + ".weight", key = four_bit_state_text_key(weight, *weight_);
  for (const auto& [name, tensor] : state) {
    if (name == key) check_four_bit_state_text(key, tensor, *weight_);
    // The scales and code tables a dequantisation multiplies by (absmax is uint8 codes under double
    // quantisation): finite, the maxima not negative.
    const bool maxima = name == weight + ".absmax" || name == weight + ".nested_absmax";
    if ((maxima || name == weight + ".quant_map" || name == weight + ".nested_quant_map") && tensor.is_floating_point())
      require(tensor.isfinite().all().item<bool>() && (!maxima || (tensor >= 0).all().item<bool>()), "'", name,
              "' holds values that are not finite numbers", maxima ? " at least 0" : "");
  }
}

void FourBitLinear::state_loaded(const std::string& module, const NamedTensors& state) {
  const std::string key = four_bit_state_text_key(module + ".weight", *weight_);
  for (const auto& entry : state)
    if (entry.first == key) take_four_bit_state_text(*weight_, entry.second);
}

}  // namespace acc

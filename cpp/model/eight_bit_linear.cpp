#include "model/eight_bit_linear.h"

#include <ATen/core/grad_mode.h>

#include "common/error.h"
#include "model/quantized_backward.h"

namespace acc {
namespace {

// The weight as MatMul8bitFp and both backwards compute it: CB.to(dtype).mul_(SCB[:, None] * (1 / 127)).
at::Tensor dequantized(const at::Tensor& codes, const at::Tensor& scales, at::ScalarType dtype) {
  return codes.to(dtype).mul_(scales.unsqueeze(1).mul(1.0 / 127.0));
}

// MatMul8bitFp's and MatMul8bitLt's backward: the input's gradient through the weight dequantised
// to the input's dtype.
struct EightBitLinearBackward : QuantizedLinearBackward {
  at::Tensor codes, scales;
  at::ScalarType input_dtype = at::kFloat;
  std::vector<int64_t> input_sizes;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const at::Tensor& grad = grads[0];
    torch::autograd::variable_list out(2);
    if (!grad.defined()) return out;
    if (should_compute_output(0)) {
      const at::Tensor rows = grad.reshape({-1, grad.size(-1)}).to(input_dtype);
      out[0] = at::matmul(rows, dequantized(codes, scales, input_dtype)).view(input_sizes);
    }
    if (should_compute_output(1)) out[1] = bias_gradient(grad);
    return out;
  }
  void release_variables() override {
    codes.reset();
    scales.reset();
  }
};

}  // namespace

EightBitLinear::EightBitLinear(Int8Rows weight, double threshold)
    : codes_(std::move(weight.codes)),
      scales_(std::move(weight.scales)),
      format_(at::zeros({}, codes_.options().dtype(at::kByte))),
      threshold_(threshold) {}

at::Tensor EightBitLinear::int8_product(const at::Tensor& x, const at::Tensor& bias) const {
  const at::Tensor a = x.reshape({-1, x.size(-1)});
  const Int8Rows input = int8_rows(a.to(at::kHalf), threshold_);
  at::Tensor output = int8_scaled_mm(input.codes, codes_, input.scales, scales_, bias, a.scalar_type());
  // int8_mixed_scaled_mm: the outlier columns added back in the input's dtype.
  if (input.outlier_columns && input.outlier_columns->numel() > 0) {
    const at::Tensor& columns = *input.outlier_columns;
    const at::Tensor weight_columns = int8_dequantize(codes_.index_select(1, columns), scales_);
    output = output.addmm(a.index_select(1, columns), weight_columns.to(a.scalar_type()).t());
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = codes_.size(0);
  return output.reshape(sizes);
}

at::Tensor EightBitLinear::linear(const at::Tensor& x, const at::Tensor& layer_bias, bool with_bias,
                                  bool training) const {
  if (layer_bias.defined() && layer_bias.scalar_type() != x.scalar_type()) {
    at::NoGradGuard no_grad;
    layer_bias.set_data(layer_bias.to(x.scalar_type()));
  }
  const at::Tensor bias = with_bias ? layer_bias : at::Tensor();
  at::Tensor output;
  {
    at::NoGradGuard no_history;
    // bnb.matmul: MatMul8bitFp when training on the CPU; an empty input has an empty output either way.
    if ((training && x.device().is_cpu()) || x.numel() == 0)
      output = at::linear(x, dequantized(codes_, scales_, x.scalar_type()), bias);
    else
      output = int8_product(x, bias);
  }
  set_quantized_history<EightBitLinearBackward>(output, x, bias, [&](EightBitLinearBackward& node) {
    node.codes = codes_;
    node.scales = scales_;
    node.input_dtype = x.scalar_type();
    node.input_sizes = x.sizes().vec();
  });
  return output;
}

Int8Rows EightBitLinear::with_delta(const std::string& module, const at::Tensor& delta) const {
  at::NoGradGuard no_grad;
  return quantize_8bit(module, int8_dequantize(codes_, scales_).to(delta.scalar_type()) + delta);
}

void EightBitLinear::add(const std::string& module, const at::Tensor& delta) {
  at::NoGradGuard no_grad;
  Int8Rows requantized = with_delta(module, delta);
  codes_.set_data(requantized.codes);
  scales_.set_data(requantized.scales);
}

NamedTensors EightBitLinear::merged_entries(const std::string& module, const at::Tensor& delta) const {
  Int8Rows merged = with_delta(module, delta);
  return {{module + ".weight", merged.codes}, {module + ".SCB", merged.scales}, {module + ".weight_format", format_}};
}

NamedTensors EightBitLinear::state_entries(const std::string& module) const {
  return {{module + ".SCB", scales_}, {module + ".weight_format", format_}};
}

void EightBitLinear::check_state(const std::string& module, const NamedTensors& state) const {
  for (const auto& [name, tensor] : state) {
    if (name == module + ".weight_format")
      require(tensor.numel() == 1 && !tensor.is_floating_point() && tensor.item<int64_t>() == 0, "'", name,
              "' is not 0 (bitsandbytes' \"row\" format), the only int8 weight layout bitsandbytes reads");
    if (name == module + ".SCB" && tensor.is_floating_point())
      require(tensor.isfinite().all().item<bool>() && (tensor >= 0).all().item<bool>(), "'", name,
              "' holds scales that are not finite numbers at least 0");
  }
}

}  // namespace acc

// bitsandbytes' Linear4bit (matmul_4bit's MatMul4Bit on the CPU path) over a 4-bit weight
// (model/four_bit.h): the weight is dequantised for the product and again for the input's
// gradient, never kept, as QLoRA's memory relies on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/four_bit.h"
#include "model/quantized_linear.h"

namespace acc {

class FourBitLinear : public QuantizedWeight {
 public:
  // `compute_dtype`: transformers' bnb_4bit_compute_dtype.
  FourBitLinear(FourBitWeight weight, at::ScalarType compute_dtype)
      : weight_(std::make_shared<FourBitWeight>(std::move(weight))), compute_dtype_(compute_dtype) {}

  // Linear4bit.forward: x and the bias in the compute dtype (the layer's bias cast for good, as
  // bitsandbytes does), F.linear with the weight dequantised straight to it, the result in x's
  // dtype. Backward: the input's gradient through the weight dequantised to its own dtype and then
  // cast (bitsandbytes' two roundings), the bias's as grad.sum(0) in its dtype; the weight gets none.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool with_bias, bool training) const override;
  std::vector<int64_t> shape() const override { return weight_->shape; }
  // PEFT's _get_base_layer_device_and_dtype: a Linear4bit's compute_dtype.
  at::ScalarType adapter_dtype() const override { return compute_dtype_; }
  at::Tensor codes() const override { return weight_->packed; }
  void add(const std::string& module, const at::Tensor& delta) override;  // add_to_4bit
  NamedTensors merged_entries(const std::string& module, const at::Tensor& delta) const override;
  // absmax, quant_map, nested_* and the quant_state's JSON text, after "<module>.weight".
  NamedTensors state_entries(const std::string& module) const override;
  bool is_state_text(const std::string& module, const std::string& name) const override;
  void check_state(const std::string& module, const NamedTensors& state) const override;
  void state_loaded(const std::string& module, const NamedTensors& state) override;
  at::Tensor four_bit_dequantized() const override { return dequantize_4bit(*weight_, weight_->dtype); }

 private:
  std::shared_ptr<FourBitWeight> weight_;  // shared with backward nodes still pending
  at::ScalarType compute_dtype_;
};

}  // namespace acc

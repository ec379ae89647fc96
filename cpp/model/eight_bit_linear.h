// bitsandbytes' Linear8bitLt (LLM.int8) over int8 weights (model/eight_bit.h), frozen, as
// transformers' load_in_8bit leaves a linear layer: on the CPU in training mode the weight is
// dequantised for the product (MatMul8bitFp); otherwise the input is quantised too and multiplied
// in int8, its outlier columns (llm_int8_threshold) in floating point (MatMul8bitLt).
#pragma once

#include <string>
#include <vector>

#include "model/eight_bit.h"
#include "model/quantized_linear.h"

namespace acc {

class EightBitLinear : public QuantizedWeight {
 public:
  EightBitLinear(Int8Rows weight, double threshold);

  // Linear8bitLt.forward: the layer's bias cast to x's dtype for good; the product as above, in x's
  // dtype. Backward (both ways): the input's gradient through the weight dequantised to x's dtype,
  // the bias's as grad.sum(0) in its dtype; the weight gets none.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool with_bias, bool training) const override;
  std::vector<int64_t> shape() const override { return codes_.sizes().vec(); }
  // PEFT leaves the adapters of an int8 base layer as they are made: float32.
  at::ScalarType adapter_dtype() const override { return at::kFloat; }
  at::Tensor codes() const override { return codes_; }
  // PEFT's merge into a Linear8bitLt: the weight dequantised (float32), `delta` added in its dtype,
  // quantised again as Int8Params does.
  void add(const std::string& module, const at::Tensor& delta) override;
  NamedTensors merged_entries(const std::string& module, const at::Tensor& delta) const override;
  // "<module>.SCB" (the rows' scales) and "<module>.weight_format" (uint8 0: row-major).
  NamedTensors state_entries(const std::string& module) const override;
  // A weight_format other than 0 ("row", the only one bitsandbytes reads) or scales that are not
  // finite and at least 0 are refused.
  void check_state(const std::string& module, const NamedTensors& state) const override;

 private:
  at::Tensor int8_product(const at::Tensor& x, const at::Tensor& bias) const;

  // PEFT's merge: the weight dequantised, `delta` added, quantised again as Int8Params.
  Int8Rows with_delta(const std::string& module, const at::Tensor& delta) const;
  at::Tensor codes_;   // int8 (out x in): Int8Params' CB, the module's weight
  at::Tensor scales_;  // float32 (out): its SCB
  at::Tensor format_;  // uint8 0-dim: 0
  double threshold_;
};

}  // namespace acc

// transformers' BitsAndBytesConfig, as a JSON object (its to_dict(), the quantization_config of a
// quantised model's config.json): which linear layers get 4-bit (load_in_4bit) or LLM.int8
// (load_in_8bit) weights, and how they compute.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "model/four_bit.h"

namespace acc {

struct QuantizationConfig {
  bool eight_bit = false;  // load_in_8bit, else load_in_4bit
  // llm_int8_threshold: an 8-bit layer's inputs at least this large in magnitude stay in floating
  // point (their columns) when the int8 product runs; 0 turns that off.
  double threshold = 6.0;
  FourBitType type = FourBitType::Fp4;        // bnb_4bit_quant_type, transformers' default "fp4"
  at::ScalarType compute_dtype = at::kFloat;  // bnb_4bit_compute_dtype (None: float32)
  bool double_quant = false;                  // bnb_4bit_use_double_quant
  // llm_int8_skip_modules: the modules kept as they are; none given, transformers' choice
  // (get_keys_to_not_convert: tied weights' modules and the module of the last parameter).
  std::optional<std::vector<std::string>> skip_modules;

  // Every key of to_dict() is known; exactly one of load_in_4bit and load_in_8bit must be true.
  // llm_int8_has_fp16_weight, a quant_storage other than uint8 and an fp32 CPU offload are
  // Unsupported, unknown keys and wrong types InvalidArgument, each naming the key.
  static QuantizationConfig from_json(const std::string& text);
  // transformers' rule for a skip key: the module name starts with "<key>." or matches the key as a
  // regular expression at its start, or ends with the key.
  static bool skips(const std::string& key, const std::string& module);
};

}  // namespace acc

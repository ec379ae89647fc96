#include "model/quantization_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>

#include "common/error.h"
#include "common/json_input.h"

namespace acc {
namespace {

using Json = nlohmann::json;

bool flag(const Json& value, const std::string& key) {
  require(value.is_boolean(), "quantization config: '", key, "' must be true or false, not ", value.dump());
  return value.get<bool>();
}

// getattr(torch, name) for the floating-point dtypes a layer computes in ("torch.bfloat16" too,
// as str(dtype) writes it).
at::ScalarType compute_dtype_named(const Json& value) {
  if (value.is_null()) return at::kFloat;
  require(value.is_string(), "quantization config: 'bnb_4bit_compute_dtype' must be a dtype's name, not ",
          value.dump());
  std::string name = value.get<std::string>();
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "float32" || name == "float") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16" || name == "half") return at::kHalf;
  if (name == "float64" || name == "double") return at::kDouble;
  fail(Status::InvalidArgument, "quantization config: 'bnb_4bit_compute_dtype' \"", name,
       "\" is not a floating-point dtype (float32, bfloat16, float16, float64)");
}

}  // namespace

QuantizationConfig QuantizationConfig::from_json(const std::string& text) {
  const Json json = parse_json_input(text, "quantization config");
  require(json.is_object(), "quantization config must be a JSON object (BitsAndBytesConfig's to_dict())");
  QuantizationConfig config;
  bool four_bit = false, eight_bit = false;
  for (const auto& [key, value] : json.items()) {
    if (key == "load_in_4bit" || key == "_load_in_4bit") {
      four_bit = four_bit || flag(value, key);
    } else if (key == "load_in_8bit" || key == "_load_in_8bit") {
      eight_bit = eight_bit || flag(value, key);
    } else if (key == "quant_method") {
      require(value == "bitsandbytes", "quantization config: quant_method ", value.dump(),
              " is not \"bitsandbytes\", the only one built");
    } else if (key == "bnb_4bit_quant_type") {
      require(value == "nf4" || value == "fp4", "quantization config: 'bnb_4bit_quant_type' must be \"nf4\" or ",
              "\"fp4\", not ", value.dump());
      config.type = value == "nf4" ? FourBitType::Nf4 : FourBitType::Fp4;
    } else if (key == "bnb_4bit_compute_dtype") {
      config.compute_dtype = compute_dtype_named(value);
    } else if (key == "bnb_4bit_use_double_quant") {
      config.double_quant = flag(value, key);
    } else if (key == "bnb_4bit_quant_storage") {
      if (!value.is_null() && value != "uint8" && value != "torch.uint8")
        fail(Status::Unsupported, "quantization config: 'bnb_4bit_quant_storage' ", value.dump(),
             " is not built (the 4-bit codes are stored as uint8)");
    } else if (key == "llm_int8_skip_modules") {
      if (value.is_null()) continue;
      require(value.is_array(), "quantization config: 'llm_int8_skip_modules' must be a list of module names");
      std::vector<std::string> names;
      for (const auto& name : value) {
        require(name.is_string() && !name.get<std::string>().empty(),
                "quantization config: 'llm_int8_skip_modules' holds ", name.dump(), ", not a module name");
        names.push_back(name.get<std::string>());
        try {
          std::regex check(names.back());
        } catch (const std::regex_error& e) {
          fail(Status::InvalidArgument, "quantization config: 'llm_int8_skip_modules' entry \"", names.back(),
               "\" is not a regular expression: ", e.what());
        }
      }
      config.skip_modules = std::move(names);
    } else if (key == "llm_int8_enable_fp32_cpu_offload") {
      if (flag(value, key))
        fail(Status::Unsupported, "quantization config: 'llm_int8_enable_fp32_cpu_offload' (modules offloaded by a ",
             "device map) is not built");
    } else if (key == "llm_int8_threshold") {
      require(value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0,
              "quantization config: 'llm_int8_threshold' must be a number at least 0, not ", value.dump());
      config.threshold = value.get<double>();
    } else if (key == "llm_int8_has_fp16_weight") {
      if (flag(value, key))
        fail(Status::Unsupported, "quantization config: 'llm_int8_has_fp16_weight' (8-bit layers keeping float16 ",
             "weights that train) is not built; the int8 weights stay frozen, as for LoRA");
    } else {
      fail(Status::InvalidArgument, "quantization config: unknown key '", key, "'");
    }
  }
  require(four_bit != eight_bit, "quantization config: set exactly one of \"load_in_4bit\" and \"load_in_8bit\" to ",
          "true, not ", four_bit ? "both" : "neither");
  config.eight_bit = eight_bit;
  return config;
}

bool QuantizationConfig::skips(const std::string& key, const std::string& module) {
  const auto starts = [&](const std::string& pattern) {
    return std::regex_search(module, std::regex(pattern), std::regex_constants::match_continuous);
  };
  return starts(key + "\\.") || starts(key) ||
         (module.size() >= key.size() && module.compare(module.size() - key.size(), key.size(), key) == 0);
}

}  // namespace acc

// Tensors the PyTorch exporters (tests/data/export_*.py) write as {"shape", "values", "dtype"}.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "support.h"

namespace acc_test {

// A float tensor's values, where null is NaN.
template <class Json>
std::vector<float> float_values(const Json& t) {
  std::vector<float> out;
  for (const auto& v : t["values"])
    out.push_back(v.is_null() ? std::numeric_limits<float>::quiet_NaN() : v.template get<float>());
  return out;
}

// A new tensor of the dtype named ("int64", "bool"; float32 otherwise).
template <class Json>
acc_tensor* from_json(const Json& t) {
  const auto shape = t["shape"].template get<std::vector<int64_t>>();
  if (t.contains("dtype") && t["dtype"] == "int64") return longs(t["values"].template get<std::vector<int64_t>>(), shape);
  if (t.contains("dtype") && t["dtype"] == "bool") {
    std::vector<uint8_t> values;
    for (const auto& v : t["values"]) values.push_back(v.template get<bool>());
    return bools(values, shape);
  }
  return floats(float_values(t), shape);
}

}  // namespace acc_test

// What a layer type of the model spec is made of: its arguments, how to build it as a torch::nn
// module and the same computation as TorchScript source. Shared by layers.cpp (the table of types)
// and the files that implement the larger layers (attention, transformer blocks, positions).
#pragma once

#include <torch/nn/modules/container/any.h>

#include <nlohmann/json.hpp>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace acc {

// Source: a tensor the layer reads besides its input, {"input": k} (the model's input k) or
// {"layer": i} (an earlier layer's output); a null fallback makes it optional (absent: not read).
// Padding: an int, a pair, or PyTorch's "same" ("valid", no padding, is kept as [0, 0]).
enum class Arg { Int, Float, Bool, IntOrPair, Padding, IntList, String, OptionalInt, OptionalFloat, Source };

struct ArgSpec {
  const char* name;
  Arg kind;
  nlohmann::json fallback;  // null: required (except the Optional kinds and Source, where null is the default)
};

struct LayerKind {
  std::vector<ArgSpec> args;
  std::function<torch::nn::AnyModule(const nlohmann::json&)> build;
  // The body of `forward(self, x, <Source arguments present>)`, indented by 4 spaces after its
  // first line. The module's forward takes x, then one tensor per Source argument in this order
  // (undefined where the spec leaves it out).
  std::function<std::string(const nlohmann::json&)> script;
};

// TorchScript literals.
inline std::string script_float(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  std::string text = s.str();
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
inline std::string script_bool(bool v) { return v ? "True" : "False"; }
inline std::string script_int(const nlohmann::json& v) { return std::to_string(v.get<int64_t>()); }

// Joins lines into a forward body (the first line follows the `def`'s own indentation).
inline std::string script_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += (out.empty() ? "" : "\n    ") + line;
  return out;
}

}  // namespace acc

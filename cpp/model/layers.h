// The layers a model spec may use: argument checking, construction as torch::nn modules
// (initialised as PyTorch initialises them) and the same computation as TorchScript source.
#pragma once

#include <torch/nn/modules/container/any.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace acc {

// Where a tensor that a layer reads comes from: one of the model's inputs or an earlier layer's
// output. In JSON {"input": k} or {"layer": i}.
struct TensorSource {
  bool model_input = false;
  int64_t index = 0;
};

struct LayerSpec {
  std::string type;
  nlohmann::json args;      // every argument, defaults filled in
  bool checkpoint = false;  // "checkpoint": true recomputes the layer in backward (activation_checkpoint.h)
  // The tensors its forward takes, in order: its input ("from"; by default the previous layer's
  // output, the model's input 0 for layer 0), then those its Source arguments name (a decoder's memory).
  std::vector<TensorSource> inputs;
  // The names of those tensors in its TorchScript forward: "x", then the Source arguments' names.
  std::vector<std::string> input_names;
  // Their positions among the module forward's tensor arguments (0 for the input; a Source
  // argument's position counts the absent ones before it).
  std::vector<size_t> slots;
};

// Parses and validates a JSON array of layers; errors name the layer index and the argument.
std::vector<LayerSpec> parse_layer_specs(const std::string& json_spec);

// How many inputs a model of these layers takes: one more than the highest input a layer reads.
size_t model_input_count(const std::vector<LayerSpec>& layers);
// The most inputs a layer-spec model takes ({"input": k} needs k below it).
constexpr int64_t kMaxModelInputs = 64;

torch::nn::AnyModule build_layer(const LayerSpec& spec);

// The body of a TorchScript `forward(self, x, ...)` (spec.input_names) computing the layer from its
// own parameters and buffers (named as in the nn module: self.weight, self.running_mean, ...).
std::string layer_script(const LayerSpec& spec);

}  // namespace acc

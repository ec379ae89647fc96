// The layers a model spec may use: argument checking, construction as torch::nn modules
// (initialised as PyTorch initialises them) and the same computation as TorchScript source.
#pragma once

#include <torch/nn/modules/container/any.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace acc {

struct LayerSpec {
  std::string type;
  nlohmann::json args;      // every argument, defaults filled in
  bool checkpoint = false;  // "checkpoint": true recomputes the layer in backward (activation_checkpoint.h)
};

// Parses and validates a JSON array of layers; errors name the layer index and the argument.
std::vector<LayerSpec> parse_layer_specs(const std::string& json_spec);

torch::nn::AnyModule build_layer(const LayerSpec& spec);

// The body of a TorchScript `forward(self, x)` computing the layer from its own parameters and
// buffers (named as in the nn module: self.weight, self.running_mean, ...).
std::string layer_script(const LayerSpec& spec);

}  // namespace acc

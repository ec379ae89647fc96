#include "model/layer_sizes.h"

#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "common/error.h"

namespace acc {
namespace {

using nlohmann::json;
constexpr double kFloat = 4;  // bytes of a float32 element

double product(const json& sizes) {
  double n = 1;
  for (const auto& size : sizes) n *= size.get<double>();
  return n;
}

double linear_elements(double in, double out, bool bias) { return in * out + (bias ? out : 0); }

// nn.MultiheadAttention's packed projection and out_proj, with or without their biases.
double attention_elements(double e, bool bias) { return linear_elements(e, 3 * e, bias) + linear_elements(e, e, bias); }

// A transformer layer: its attentions, feed-forward and norms, with their biases or (bias false) without.
double transformer_elements(const json& a, int attentions, int norms) {
  const double d = a["d_model"].get<double>(), ff = a["dim_feedforward"].get<double>();
  const bool bias = a["bias"];
  return attentions * attention_elements(d, bias) + linear_elements(d, ff, bias) + linear_elements(ff, d, bias) +
         norms * (bias ? 2 : 1) * d;
}

double batchnorm_bytes(const json& a) {
  const double n = a["num_features"].get<double>();
  const bool affine = a["affine"], tracked = a["track_running_stats"];
  return kFloat * ((affine ? 2 * n : 0) + (tracked ? 2 * n : 0)) + (tracked ? 8 : 0);
}

const std::map<std::string, std::function<double(const json&)>>& sized_kinds() {
  static const std::map<std::string, std::function<double(const json&)>> kinds = {
      {"linear",
       [](const json& a) {
         return kFloat * linear_elements(a["in_features"].get<double>(), a["out_features"].get<double>(), a["bias"]);
       }},
      {"conv2d",
       [](const json& a) {
         const double out = a["out_channels"].get<double>();
         const double per_group = a["in_channels"].get<double>() / a["groups"].get<double>();
         const json& k = a["kernel_size"];
         const double kernel = k.is_array() ? product(k) : k.get<double>() * k.get<double>();
         return kFloat * (out * per_group * kernel + (a["bias"].get<bool>() ? out : 0));
       }},
      {"layernorm",
       [](const json& a) {
         const double tensors = a["elementwise_affine"].get<bool>() ? (a["bias"].get<bool>() ? 2 : 1) : 0;
         return kFloat * tensors * product(a["normalized_shape"]);
       }},
      {"rmsnorm",
       [](const json& a) { return a["elementwise_affine"].get<bool>() ? kFloat * product(a["normalized_shape"]) : 0; }},
      {"batchnorm1d", batchnorm_bytes},
      {"batchnorm2d", batchnorm_bytes},
      {"multihead_attention",
       [](const json& a) { return kFloat * attention_elements(a["embed_dim"].get<double>(), a["bias"]); }},
      {"transformer_encoder_layer", [](const json& a) { return kFloat * transformer_elements(a, 1, 2); }},
      {"transformer_decoder_layer", [](const json& a) { return kFloat * transformer_elements(a, 2, 3); }},
      {"embedding",
       [](const json& a) { return kFloat * a["num_embeddings"].get<double>() * a["embedding_dim"].get<double>(); }},
      {"positional_embedding",
       [](const json& a) { return kFloat * a["num_embeddings"].get<double>() * a["embedding_dim"].get<double>(); }},
  };
  return kinds;
}

// MemAvailable plus SwapFree from /proc/meminfo, in bytes; none where it cannot be read.
std::optional<double> memory_left() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::optional<double> available, swap_free;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemAvailable:") available = kib * 1024;
    if (key == "SwapFree:") swap_free = kib * 1024;
  }
  if (!available) return std::nullopt;
  return *available + swap_free.value_or(0);
}

std::string gigabytes(double bytes) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(1);
  text << bytes / 1e9 << " GB";
  return text.str();
}

}  // namespace

double layer_weight_bytes(const LayerSpec& spec) {
  auto it = sized_kinds().find(spec.type);
  return it == sized_kinds().end() ? 0 : it->second(spec.args);
}

void require_memory_for(double bytes, const std::string& what) {
  // Sizes past 64 bits are no sizes at all: building the layer refuses them as too large (InvalidArgument).
  if (bytes <= 0 || bytes >= 9.2e18) return;
  const std::optional<double> left = memory_left();
  if (left && bytes > *left)
    fail(Status::OutOfMemory, what, " need ", gigabytes(bytes), " (", bytes, " bytes), more than the ",
         gigabytes(*left), " this machine has left (MemAvailable and free swap): refused before allocating");
}

void require_memory_for_layers(const std::vector<LayerSpec>& layers, bool weights_pending) {
  double total = 0, largest = 0;
  size_t largest_layer = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const double bytes = layer_weight_bytes(layers[i]);
    total += bytes;
    if (bytes > largest) {
      largest = bytes;
      largest_layer = i;
    }
  }
  if (weights_pending)
    require_memory_for(
        largest, "the weights of layer " + std::to_string(largest_layer) + " (" + layers[largest_layer].type + ")");
  else
    require_memory_for(total, "the model's weights");
}

}  // namespace acc

// Linear layers whose weights bitsandbytes holds quantised (transformers' load_in_4bit and
// load_in_8bit): QuantizedWeight is what each kind provides (four_bit_linear.h, eight_bit_linear.h);
// the TorchScript markers here run a layer's product in place of its calls, so that no
// floating-point weight is ever kept.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/output_adapter.h"
#include "tensor/named_tensors.h"

namespace acc {

// A layer's quantised weight and the product its bitsandbytes module computes with it.
class QuantizedWeight {
 public:
  virtual ~QuantizedWeight() = default;
  // The module's forward on x, and its backward: `bias` is the layer's (undefined if none), which
  // the module may cast for good, as bitsandbytes does; without `with_bias` the product leaves it
  // out (a forward's torch.linear(x, weight, None)). `training` is the module's mode.
  virtual at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool with_bias, bool training) const = 0;
  virtual std::vector<int64_t> shape() const = 0;  // the weight's (out x in)
  // The dtype PEFT gives a LoRA adapter on the layer (the base layer's floating-point dtype).
  virtual at::ScalarType adapter_dtype() const = 0;
  virtual at::Tensor codes() const = 0;  // what the module's `weight` holds
  // PEFT's merge into the layer: `delta` added to the weight dequantised, quantised again into the
  // layer's own tensors (the module and the state dict keep holding them).
  virtual void add(const std::string& module, const at::Tensor& delta) = 0;
  // What add would leave, the layer unchanged: the module's state-dict entries (its `weight`, the
  // codes, and state_entries) for the weight plus `delta` (save_model's merged files).
  virtual NamedTensors merged_entries(const std::string& module, const at::Tensor& delta) const = 0;
  // The entries the module's _save_to_state_dict adds under `module`'s prefix, aliasing the
  // weight's tensors (a load copies into them).
  virtual NamedTensors state_entries(const std::string& module) const = 0;
  // An entry of those that a load takes by state_loaded, not by copying in place.
  virtual bool is_state_text(const std::string&, const std::string&) const { return false; }
  // Fails (InvalidArgument, naming the entry) where `state` holds an entry of the layer's that it
  // cannot take; before anything is loaded.
  virtual void check_state(const std::string&, const NamedTensors&) const {}
  // After a load copied the other entries in.
  virtual void state_loaded(const std::string&, const NamedTensors&) {}
  // A 4-bit weight dequantised to the dtype it was quantised from (bitsandbytes' dequantize_4bit
  // with its quant_state); undefined for other kinds.
  virtual at::Tensor four_bit_dequantized() const { return {}; }
};

struct QuantizedLayer {
  std::string module;
  std::shared_ptr<QuantizedWeight> weight;
  at::Tensor bias;  // the module's (undefined if none)
};

// Replaces each call of `layers` (module paths) in `graph` (a forward taking self first) by a
// marker running layer i of `token`'s installed layers; every other call is inlined. Unsupported,
// naming the layer, where the forward reads a layer's weight other than as torch.linear(x, weight,
// its bias or None), or calls it with other than one tensor.
void mark_quantized_linears(torch::jit::Graph& graph, const std::vector<std::string>& layers, int64_t token);

// A model's quantised layers, in the markers' order, each with LoRA's branch on its output (empty:
// none; run on the layer's input and output, as PEFT's lora.bnb layers add it, whether the forward
// calls the layer or computes torch.linear with its weight), and whether the model trains.
struct QuantizedLayers {
  std::vector<QuantizedLayer> layers;
  std::vector<OutputAdapter> adapters;
  std::function<bool()> training;
  std::vector<std::string> modules() const;  // the layers' module paths, in order
  // The index of the layer at `module`, if it is one.
  std::optional<size_t> index_of(const std::string& module) const;
};

// What the markers of `token` run; null removes the entry.
void install_quantized_layers(int64_t token, std::shared_ptr<const QuantizedLayers> layers);

}  // namespace acc

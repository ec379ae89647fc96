// bitsandbytes' Linear4bit forward and backward (matmul_4bit's MatMul4Bit on the CPU path), and the
// TorchScript markers that run it in place of a quantised layer's call: the weight is dequantised
// for the product and again for the input's gradient, never kept, as QLoRA's memory relies on.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/four_bit.h"
#include "model/output_adapter.h"

namespace acc {

// A layer whose weight is held in 4 bits: the weight, the layer's bias (undefined if none) and
// transformers' bnb_4bit_compute_dtype.
struct FourBitLayer {
  std::string module;
  std::shared_ptr<FourBitWeight> weight;
  at::Tensor bias;
  at::ScalarType compute_dtype = at::kFloat;
};

// Linear4bit.forward: x and the bias in the compute dtype (the layer's bias cast for good, as
// bitsandbytes does), F.linear with the weight dequantised
// straight to it, the result in x's dtype. Backward: the input's gradient through the weight
// dequantised to its own dtype and then cast (bitsandbytes' two roundings), the bias's as
// grad.sum(0) in its dtype; the weight gets none.
// Without `with_bias`, the layer's bias is left out (a forward's torch.linear(x, weight, None)).
at::Tensor four_bit_linear(const at::Tensor& x, const FourBitLayer& layer, bool with_bias = true);

// Replaces each call of `layers` (module paths) in `graph` (a forward taking self first) by a
// marker running four_bit_linear with layer i of `token`'s installed layers; every other call is
// inlined. Unsupported, naming the layer, where the forward reads a layer's weight itself or calls
// it with other than one tensor.
void mark_four_bit_linears(torch::jit::Graph& graph, const std::vector<std::string>& layers, int64_t token);

// A model's 4-bit layers, in the markers' order, each with LoRA's branch on its output (empty:
// none; run on the layer's input and output, as PEFT's lora.bnb.Linear4bit adds it, whether the
// forward calls the layer or computes torch.linear with its weight), and whether the model trains.
struct FourBitLayers {
  std::vector<FourBitLayer> layers;
  std::vector<OutputAdapter> adapters;
  std::function<bool()> training;
  std::vector<std::string> modules() const;  // the layers' module paths, in order
  // The index of the layer at `module`, if it is one.
  std::optional<size_t> index_of(const std::string& module) const;
};

// What the markers of `token` run; null removes the entry.
void install_four_bit_layers(int64_t token, std::shared_ptr<const FourBitLayers> layers);

}  // namespace acc

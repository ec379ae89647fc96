// (IA)^3 (Liu et al. 2022, "Infused Adapter by Inhibiting and Amplifying Inner Activations"; PEFT's
// IA3Config): each targeted layer trains one vector, ia3_l, that multiplies its output (or, for the
// feedforward modules, its input) element-wise; the layer's own tensors stay frozen. Computed as
// PEFT's ia3.Linear and ia3.Conv2d/Conv3d compute it, dtype casts included, through the layers'
// output and input adapters (model/output_adapter.h; a TorchScript model's markers,
// model/script_lora.h). The adapters live in LoraAdapters (model/peft/lora.h) as LoraAdapter entries
// whose `ia3` is set, so that listing, saving, merging, enabling and sharding treat them alike.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

// The vector's name after its module's (PEFT's "<module>.ia3_l.<adapter>", without the adapter name).
constexpr const char* kIa3Suffix = ".ia3_l";

// One adapter for each of `chosen` (the sites the configuration targets, in the model's order),
// drawn as PEFT's update_layer draws them from the global generator (torch.randn of the vector's
// shape, then ones where init_ia3_weights), in the layer's dtype and float32 where that is half
// precision (PEFT's autocast_adapter_dtype). Checks every site first, changing nothing: a layer
// PEFT's IA3 takes (nn.Linear, transformers' Conv1D, nn.Conv2d, nn.Conv3d), called as a module
// (Unsupported where the forward reads its weight itself, or the layer is quantised).
std::vector<LoraAdapter> make_ia3_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The shape PEFT gives the vector of `site` (out x 1, feedforward 1 x in; a convolution's 1 x
// channels x 1 ...).
std::vector<int64_t> ia3_vector_shape(const LinearSite& site, bool feedforward);

// PEFT's forward: the output times the vector (a convolution's computed in the vector's dtype and
// returned in the input's), or where `enabled` is false the base layer's output (a convolution's
// in the input's dtype, as PEFT casts it either way).
OutputAdapter ia3_output_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled);
// A feedforward adapter's input side: the input times the vector, cast back to the input's dtype
// (a convolution's to its weight's); empty for the others.
InputAdapter ia3_input_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled);

// PEFT's merge: the weight `w` (as the site stores it) times the vector along its outputs, or its
// inputs for a feedforward adapter, in w's dtype; and the bias of a layer whose output it scales.
at::Tensor ia3_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& vector);
at::Tensor ia3_bias(const at::Tensor& bias, const at::Tensor& vector);

}  // namespace acc

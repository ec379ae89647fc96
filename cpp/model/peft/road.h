// RoAd (Liao et al. 2024, "2D Rotary Adaptation"; PEFT's RoadConfig): each targeted linear layer's
// output is rotated pair by pair and scaled: within each group of group_size outputs, output j and
// output j + group_size / 2 form a 2-D vector turned by a trained angle theta and scaled by a trained
// alpha. road_1 shares one theta and alpha per pair (out / 2 of each), road_2 gives each output its
// own (out), road_4 each of the rotation's two columns its own (2 out). As PEFT's road.Linear
// computes it, on nn.Linear; merging multiplies the weight and the bias by the rotation matrix.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kRoadTheta = ".road_theta";
constexpr const char* kRoadAlpha = ".road_alpha";

// road_theta and road_alpha, each of the variant's size for the layer's outputs.
std::vector<FactorShape> road_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), as PEFT's update_layer makes them: theta
// zeros and alpha ones (the layer unchanged), or with init_weights false normal_(0, 0.5) and
// normal_(1, 0.5) from the global generator. Checks every site first, changing nothing: nn.Linear (a
// spec's linear) the forward calls as a module, its outputs a multiple of group_size (else
// InvalidArgument, PEFT's TypeError and ValueError; a quantised layer Unsupported).
std::vector<LoraAdapter> make_road_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// PEFT's merge: the rotation matrix (out x out, from `factors`: theta and alpha, an adapter's own or
// a state's) times the weight `w`, and times the bias, in their dtype.
at::Tensor road_merged_weight(const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config);
at::Tensor road_merged_bias(const at::Tensor& bias, const NamedTensors& factors, const LoraConfig& config);

// PEFT's forward: the base layer's output (bias included) cast to theta's dtype, rotated and scaled,
// cast back; disabled, the output as it is.
OutputAdapter road_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled);

}  // namespace acc

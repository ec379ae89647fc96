// HiRA (Huang et al. 2025, "Hadamard High-Rank Adaptation"; PEFT's HiraConfig): each targeted linear
// layer trains hira_A (r x in) and hira_B (out x r), and its weight W computes as W + W * (B A), the
// low-rank product's Hadamard product with the weight: a high-rank update from rank-r factors. As
// PEFT's hira.Linear computes it (its output plus F.linear(dropout(x), W * (B A))), on nn.Linear and
// transformers' Conv1D; PEFT's embedding and convolution layers are not built here.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kHiraA = ".hira_A";
constexpr const char* kHiraB = ".hira_B";
// The weight before other adapters merged into it, where merge_into_weights is given one (never in files).
constexpr const char* kHiraUnmergedWeight = ".hira_unmerged_weight";

// hira_A (r x in), hira_B (out x r), r the module's (rank_pattern's).
std::vector<FactorShape> hira_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), as PEFT's update_layer draws them from the
// global generator: torch.randn of A's shape, then of B's; then, init_weights true, A
// kaiming_uniform_(a = sqrt(5)) and B zeros, "gaussian" A normal_(std 1 / r) and B zeros, false
// both as drawn. Checks every site first, changing nothing: nn.Linear or Conv1D the forward calls as
// a module (an embedding or convolution Unsupported: PEFT's HiRA layers for them are not built).
std::vector<LoraAdapter> make_hira_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// PEFT's merge: w + w0 * (B A) (transposed for Conv1D), the product in w's dtype; w0 the weight
// before any adapter merged into it (`factors`' kHiraUnmergedWeight, else w).
at::Tensor hira_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors);

// PEFT's forward: the output plus F.linear(dropout(x), W * (B A)) with x in A's dtype, in the
// output's dtype; disabled, the output as it is.
OutputAdapter hira_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled);

}  // namespace acc

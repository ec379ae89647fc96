// GraLoRA (Jung et al. 2025, "Granular Low-Rank Adaptation"; PEFT's GraloraConfig): each targeted
// linear layer's input and output are cut into gralora_k blocks, and each of the k x k blocks of the
// delta is its own low-rank product of rank r / k: gralora_A (k x in/k x r) and gralora_B
// (k x r x out/k) hold the blocks' factors, exchanged between blocks as PEFT's einsums exchange them;
// with hybrid_r a plain LoRA pair of that rank (gralora_A_general.weight, gralora_B_general.weight)
// adds beside them. The scaling is alpha / (r + hybrid_r). As PEFT's gralora.Linear computes it, on
// nn.Linear and transformers' Conv1D.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kGraloraA = ".gralora_A";
constexpr const char* kGraloraB = ".gralora_B";
constexpr const char* kGraloraGeneralA = ".gralora_A_general.weight";
constexpr const char* kGraloraGeneralB = ".gralora_B_general.weight";

// gralora_A (k x in/k x r), gralora_B (k x r x out/k), then with hybrid_r the general pair
// (hybrid_r x in, out x hybrid_r).
std::vector<FactorShape> gralora_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), as PEFT's update_layer draws them from
// the global generator: block by block, A's rows kaiming_uniform_(a = sqrt(5)) and B zeros (or, with
// init_weights false, Kaiming draws too); with hybrid_r the general pair as two new nn.Linear layers
// (their own draws) whose A is drawn again and B zeroed (or drawn). Checks every site first,
// changing nothing: nn.Linear or Conv1D the forward calls as a module, its inputs and outputs
// multiples of gralora_k (else InvalidArgument, PEFT's TypeError and ValueError).
std::vector<LoraAdapter> make_gralora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` (as the site stores it) plus PEFT's get_delta_weight from `factors`, in
// w's dtype.
at::Tensor gralora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors,
                                 const LoraConfig& config);

// PEFT's forward: the output plus scaling times the blocks' branch (dropout on its input), and the
// general pair's (a dropout mask of its own), the result in the input's dtype (also when disabled).
OutputAdapter gralora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                     std::shared_ptr<const bool> enabled);

}  // namespace acc

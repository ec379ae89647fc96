// DeLoRA (Bini et al. 2025, "Decoupling Angles and Strength in Low-rank Adaptation"; PEFT's
// DeloraConfig): each targeted linear layer trains delora_A (r x in), delora_B (out x r) and
// delora_lambda (1), and adds F.linear(F.linear(x * w_norm, A) * (lambda / r) / (|A_i| |B^i|), B):
// a low-rank delta whose rows and columns are normalised, its strength lambda, scaled per input by
// the frozen norms of the weight's columns at the start, delora_w_norm (in; a buffer of the model's
// state and of PEFT's files). As PEFT's delora.DeloraLinear computes it, on nn.Linear. The trained
// tensors live in LoraAdapter::factors, the norms in LoraAdapter::buffers.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kDeloraA = ".delora_A";
constexpr const char* kDeloraB = ".delora_B";
constexpr const char* kDeloraLambda = ".delora_lambda";
constexpr const char* kDeloraWeightNorm = ".delora_w_norm";

// delora_A (r x in), delora_B (out x r), delora_lambda (1), then the buffer delora_w_norm (in), r the
// module's (rank_pattern's).
std::vector<FactorShape> delora_factor_shapes(const LoraConfig& config, const LinearSite& site);

// Why a file's tensor named with `suffix` cannot be it (empty where it can).
std::string delora_file_tensor_refusal(const std::string& suffix, const at::Tensor& tensor);

// One adapter for each of `chosen` (in the model's order), as PEFT's update_layer makes them: A
// kaiming_uniform_(a = sqrt(5)) from the global generator, B zeros (or, init_weights false, drawn so
// too), lambda the module's delora_lambda (lambda_pattern's), the norms torch.norm(W, dim=0). Checks
// every site first, changing nothing: nn.Linear or a spec's linear the forward calls as a module
// (anything else InvalidArgument, PEFT's TypeError; a quantised layer Unsupported).
std::vector<LoraAdapter> make_delora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` plus PEFT's get_delta_weight from `tensors` (an adapter's own or a state's:
// A, B, lambda and the norms), in W's dtype.
at::Tensor delora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& tensors);

// PEFT's forward: the output plus the branch (module_dropout on the input in training), summed into
// zeros of the output's dtype, the result in the input's dtype (also when disabled).
OutputAdapter delora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                    std::shared_ptr<const bool> enabled);

}  // namespace acc

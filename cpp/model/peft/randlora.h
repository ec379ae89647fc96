// RandLoRA (Albert et al. 2025, "RandLoRA: Full-rank parameter-efficient fine-tuning of large
// models"; PEFT's RandLoraConfig): one pair of frozen random bases for all the targeted layers,
// randlora_A (r x 1 x the smaller side) and randlora_B (the larger side x num_bases x r, num_bases =
// ceil(smaller side / r)), drawn from a generator of their own seeded projection_prng_key (Kaiming
// draws in bfloat16, or ternary sparse ones); each layer trains randlora_lambda (r x n) and
// randlora_gamma (n x its smaller side), n = ceil(its smaller side / r), and adds
// F.linear(F.linear(x, first), second) * randlora_alpha / r, the bases scaled by lambda and gamma
// (PEFT's UniqueBaseGrad, its hand-written backward too). As PEFT's randlora.Linear computes it on
// the CPU, on nn.Linear and transformers' Conv1D. The trained tensors live in
// LoraAdapter::factors, the bases in LoraAdapter::projections (a, b), shared by the adapter's layers.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

// The trained tensors' names after their module's, in the order PEFT's layer registers them; the
// bases' names in PEFT's files (each layer's file entries hold them too) and in the model's state.
constexpr const char* kRandloraLambda = ".randlora_lambda";
constexpr const char* kRandloraGamma = ".randlora_gamma";
constexpr const char* kRandloraBasesA = "base_model.randlora_A";
constexpr const char* kRandloraBasesB = "base_model.randlora_B";
constexpr const char* kRandloraBufferA = "randlora_A";
constexpr const char* kRandloraBufferB = "randlora_B";

// randlora_lambda (r x n), randlora_gamma (n x the layer's smaller side).
std::vector<FactorShape> randlora_factor_shapes(const LoraConfig& config, const LinearSite& site);

// The bases' shapes over the targeted layers (PEFT's _find_dim: the largest output and input).
std::pair<std::vector<int64_t>, std::vector<int64_t>> randlora_bases_shapes(const LoraConfig& config,
                                                                            const std::vector<LinearSite>& chosen);

// One adapter for each of `chosen` (in the model's order), sharing bases drawn as PEFT's
// _init_randlora_A_randlora_B (or _sparse) draws them from a CPU generator seeded
// projection_prng_key (the global generator untouched), then placed as PEFT places them: in the last
// layer's dtype, float32 where that is half precision (their values rounded to it), each layer's
// tensors as its update_layer
// makes them (torch.randn(r, n) from the global generator, gamma ones / the larger side; with
// init_weights lambda zeros and gamma 1 / max(n, the smaller side)). Checks every site first, changing
// nothing: nn.Linear, transformers' Conv1D or a spec's linear, called as a module (anything else
// InvalidArgument, PEFT's ValueError; a quantised layer Unsupported).
std::vector<LoraAdapter> make_randlora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` plus PEFT's get_delta_weight from `lambda` and `gamma` (an adapter's own or
// a state's): (second @ first) * scaling (half-precision bases in float32 on the CPU), in the
// weight's layout and dtype.
at::Tensor randlora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const at::Tensor& lambda,
                                  const at::Tensor& gamma);

// PEFT's forward: the output plus the branch (randlora_dropout on the input in training), cast to
// the input's dtype (also when disabled).
OutputAdapter randlora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                      std::shared_ptr<const bool> enabled);

}  // namespace acc

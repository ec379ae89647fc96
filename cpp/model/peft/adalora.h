// AdaLoRA (Zhang et al. 2023, "Adaptive Budget Allocation for Parameter-Efficient Fine-Tuning";
// PEFT's AdaLoraConfig): LoRA in an SVD-like form, W + B (A * E) * lora_alpha / (ranknum + 1e-5),
// with A (r x in) and B (out x r) kept near orthogonal by a regularization added to the loss, and E
// (r x 1) the singular values, which the rank allocator (model/peft/adalora_allocator.h) zeroes where
// they matter least, so that the ranks follow a falling budget while training. ranknum, the rank the
// layer started with, is a frozen parameter (PEFT's). Computed as PEFT's SVDLinear (nn.Linear,
// transformers' Conv1D) and SVDConv2d compute. The trained tensors live in LoraAdapter::factors,
// ranknum in LoraAdapter::ranknum.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

// The tensors' names after their module's (PEFT's ParameterDict entries, without the adapter name),
// in the order PEFT's layer lists them.
constexpr const char* kAdaloraA = ".lora_A";
constexpr const char* kAdaloraB = ".lora_B";
constexpr const char* kAdaloraE = ".lora_E";
constexpr const char* kAdaloraRanknum = ".ranknum";

// A layer's A (rank x in, a convolution's in x kernel), B (out x rank) and E (rank x 1), where the
// rank is init_r or, for a layer of the configuration's held pattern (a file's), its kept entries.
std::vector<FactorShape> adalora_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), drawn as PEFT's update_layer draws them
// from the global generator: torch.randn for A, E, B and ranknum (then init_r), and with
// init_lora_weights E zeroed and A, B from normal(0, 0.02). A layer of the configuration's held
// pattern (a file's rank_pattern) is then drawn again at its kept rank, in the pattern's order, as
// PEFT's resize_modules_by_rank_pattern does; its ranknum stays init_r. Checks every site first, changing
// nothing: nn.Linear, transformers' Conv1D, a spec's linear or nn.Conv2d without groups, called as
// a module (an embedding, another convolution or an attention InvalidArgument, as PEFT's
// ValueError; a quantised layer, a grouped convolution or a weight the forward reads itself
// Unsupported).
std::vector<LoraAdapter> make_adalora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// PEFT's get_delta_weight from `factors` (A, B, E: an adapter's own or a state's) and the adapter's
// ranknum and scaling, in the layout of the weight of `shape` (a Conv1D's transposed, a
// convolution's reshaped; the weight merged, whole where a stage 3 layer holds a slice).
at::Tensor adalora_delta(const LoraAdapter& adapter, const NamedTensors& factors, c10::IntArrayRef shape);

// PEFT's SVDLinear / SVDConv2d forward: the output plus (dropout(x) @ (A * E)^T @ B^T) * scaling /
// (ranknum + 1e-5), a convolution's the layer's convolution of dropout(x) with that delta.
OutputAdapter adalora_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled);

// AdaLoraModel.forward's orthogonal regularization: the mean over the adapters' A and B, in the
// model's order, of ||A A^T - I||_F and ||B^T B - I||_F, with autograd history.
at::Tensor adalora_orthogonal_regularization(const std::vector<LoraAdapter>& adapters);

// What PEFT's files hold of the adapter: A, B and E under their names after the module's, only the
// rows of the entries `config`'s rank_pattern keeps (resize_state_dict_by_rank_pattern); never ranknum.
NamedTensors adalora_saved_factors(const LoraAdapter& adapter, const AdaloraConfig& config);

}  // namespace acc

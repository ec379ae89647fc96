// SHiRA (Bhardwaj et al. 2024, "Sparse High Rank Adapters"; PEFT's ShiraConfig): each targeted linear
// layer trains r (in + out) entries of its weight, "<module>.shira_weight", at fixed places,
// "<module>.shira_indices" (2 x K int32: rows, then columns), and computes with W plus that sparse
// matrix. As PEFT's shira.Linear computes it, on nn.Linear. The values live in LoraAdapter::factors,
// the places in LoraAdapter::indices (frozen, in the adapter's files, not in the model's state: PEFT
// keeps them in a plain dict).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kShiraWeight = ".shira_weight";
constexpr const char* kShiraIndices = ".shira_indices";

// shira_weight: r (in + out) values.
std::vector<FactorShape> shira_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), as PEFT makes them: the places from a CPU
// generator of the layer's own (PEFT's random_mask: the first r (in + out) entries of
// torch.randperm(out * in), seeded random_seed or left at a new generator's default seed), in
// row-major order; the values zeros, or (init_weights false) torch.randn from the global generator.
// Checks every site first, changing nothing: nn.Linear or a spec's linear the forward calls as a
// module (a convolution, transformers' Conv1D, an embedding or an attention is InvalidArgument,
// PEFT's TypeError; a quantised layer Unsupported) with at least r (in + out) entries (PEFT's
// ValueError: InvalidArgument). Another mask_type (a file's: PEFT's mask_fn is Python code) leaves
// the places zeros, for the file's to replace.
std::vector<LoraAdapter> make_shira_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// Why `indices` cannot be the places of `values` in an out x in weight (empty where they can): a
// 2 x K tensor of integers (or of whole float32 numbers, as PEFT writes them on Windows), K the
// values' count, rows below out, columns below in.
std::string shira_indices_refusal(const at::Tensor& indices, int64_t values, int64_t out, int64_t in);

// `w` (out x in) plus the values at their places (each place gaining its values once, as PEFT's
// sparse sum), computed in the wider of the two dtypes and rounded to W's; autograd reaches `values`.
at::Tensor shira_merged_weight(const at::Tensor& w, const at::Tensor& values, const at::Tensor& indices);

// PEFT's forward: F.linear with the merged weight and the layer's bias (under autocast, as F.linear
// casts); the layer's own output while disabled, in its dtype (PEFT's SHiRA does not cast back).
OutputAdapter shira_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                   std::shared_ptr<const bool> enabled);

}  // namespace acc

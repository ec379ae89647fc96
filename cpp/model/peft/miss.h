// MiSS (Kang et al. 2024, "MiSS: Balancing LoRA Performance and Efficiency with Simple Shard
// Sharing"; PEFT's MissConfig, formerly Bone): each targeted linear layer trains one shard,
// "<module>.miss_block", shared by every r-wide block of its input. Three variants, PEFT's init_weights:
// - "true" (balance, zeros) and "false" (Kaiming draws): miss_block is r x out; the layer adds
//   (the input's r-wide blocks summed, the input zero-padded to a multiple of r) times miss_block;
// - "mini": miss_block is r x mini_r, repeated out / mini_r times along the outputs, as above;
// - "bat": miss_block is out/r x r x r; the layer computes with W + W_blocks B + B, each r x r block
//   of W multiplied by its row of blocks' shard (PEFT's get_delta_weight), W frozen.
// As PEFT's miss.MissLinear computes them, on nn.Linear. The tensor lives in LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kMissBlock = ".miss_block";

// miss_block: r x out, r x mini_r ("mini") or out/r x r x r ("bat").
std::vector<FactorShape> miss_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), as PEFT's update_layer makes it: zeros,
// or (init_weights "false") kaiming_uniform_(a = sqrt(5)) from the global generator. Checks every
// site first, changing nothing: nn.Linear or a spec's linear the forward calls as a module (a
// convolution, transformers' Conv1D, an embedding or an attention is InvalidArgument, PEFT's
// TypeError; a quantised layer Unsupported); "bat" needs r to divide the layer's inputs and outputs,
// "mini" mini_r its outputs (PEFT's ValueErrors: InvalidArgument).
std::vector<LoraAdapter> make_miss_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` (out x in) merged with `block`: W + W_blocks B + B ("bat"), else W plus B's
// transpose laid over each r-wide block of columns; computed in B's dtype, rounded to W's.
at::Tensor miss_merged_weight(const at::Tensor& w, const at::Tensor& block, const LoraConfig& config);

// The layer's forward as PEFT's: the shard's branch added to its output (dropout on the padded
// input), or ("bat") the layer computed anew with the merged weight; the result in the input's dtype,
// also while disabled (its output unchanged then).
OutputAdapter miss_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled);

}  // namespace acc

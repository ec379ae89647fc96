// OFT (Qiu et al. 2023, "Controlling Text-to-Image Diffusion by Orthogonal Finetuning"; PEFT's
// OFTConfig) on linear layers: each targeted layer's input is rotated block by block before the
// layer computes, W frozen; the rotations come from one trained tensor per layer, oft_R.weight
// (r blocks x block (block - 1) / 2: each block's upper triangle of a skew-symmetric Q), by the
// Cayley transform R = (I + Q)^-1 (I - Q) or PEFT's Cayley-Neumann series. Computed as PEFT's
// oft.Linear computes it, through the layers' input adapters (model/output_adapter.h; a
// TorchScript model's input markers). The tensor lives in LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kOftSuffix = ".oft_R.weight";

// How the rotations are made (LoraConfig's OFT settings, kept with each layer's input adapter).
struct OftRotation {
  bool coft = false;  // each Q projected into the ball of eps / sqrt(blocks) around zero, in place
  double eps = 6e-5;
  bool cayley_neumann = true;  // the series with `terms` terms; else solve(I + Q, I - Q) from the right
  int64_t terms = 5;
  bool block_share = false;  // one block's rotation for every block
  static OftRotation of(const LoraConfig& config);
};

// PEFT's adjust_oft_parameters: the divisor of `in_features` nearest to `params` (the lower one on
// a tie; in_features itself for params at least as large).
int64_t oft_adjust(int64_t in_features, int64_t params);

// The layer's blocks and their size for `config` (r, or oft_block_size where r is 0), adjusted to
// divide its input as PEFT adjusts them.
std::pair<int64_t, int64_t> oft_layout(const LoraConfig& config, int64_t in_features);

// oft_R.weight's name and shape for the layer: blocks (1 with block_share) x block (block - 1) / 2.
std::vector<FactorShape> oft_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), its weight zeros (init_weights) or
// normal(0, 0.1) from the global generator. Checks every site first, changing nothing: an
// nn.Linear or a spec's linear whose input can be rotated (a forward that calls it as a module);
// anything else is InvalidArgument (PEFT's), a convolution or a quantised layer Unsupported.
std::vector<LoraAdapter> make_oft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` merged with the rotations of `weight`: (R_blockdiag W^T)^T, PEFT's merge.
at::Tensor oft_merged_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& weight,
                             const OftRotation& how);

// PEFT's oft.Linear forward: the input, cast to the weight's dtype, rotated block by block and cast
// back (unchanged while disabled).
InputAdapter oft_input_adapter(const LoraAdapter& adapter, const OftRotation& how, std::shared_ptr<const bool> enabled);

}  // namespace acc

// BOFT (Liu et al. 2024, "Parameter-Efficient Orthogonal Finetuning via Butterfly Factorization";
// PEFT's BOFTConfig): each targeted layer's input is rotated by an orthogonal matrix made of
// boft_n_butterfly_factor factors, each a block diagonal of Cayley rotations (boft_R: factors x
// blocks x block x block) permuted by a butterfly permutation, and its output scaled per output
// (boft_s), W frozen. A linear layer computes base(x M) with its bias taken out, scaled and put back
// (an input and an output adapter); a 2-D convolution computes with its weight rotated, (M W^T)^T * s
// (an output adapter). As PEFT's boft.Linear and boft.Conv2d compute them, with the factors' block
// diagonals as PEFT's CUDA extension builds them (PEFT on a CPU takes one factor whatever
// boft_n_butterfly_factor says). The tensors live in LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kBoftR = ".boft_R";
constexpr const char* kBoftS = ".boft_s";

// A layer's butterfly: its factors, blocks per factor and block size.
struct BoftLayout {
  int64_t factors = 1, blocks = 0, block = 0;
};

// The layer's layout for `config` (boft_block_size or boft_block_num, boft_n_butterfly_factor),
// InvalidArgument where PEFT's update_layer refuses the combination, naming the layer.
BoftLayout boft_layout(const LoraConfig& config, const LinearSite& site);

// boft_R (factors x blocks x block x block) and boft_s (out x 1; a convolution's 1 x out).
std::vector<FactorShape> boft_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order): zeros and ones (init_weights), else boft_R
// from normal(0, 0.1) and boft_s from normal(1, 0.1), R first, from the global generator. Checks every
// site first, changing nothing: nn.Linear or a spec's linear whose input can be rotated (a forward
// that calls it as a module), or nn.Conv2d of a square kernel, one stride and one padding, without
// dilation or groups; transformers' Conv1D, an embedding or an attention is InvalidArgument (PEFT's
// TypeError), a quantised layer or another convolution Unsupported.
std::vector<LoraAdapter> make_boft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` merged with `boft_r` and `boft_s` (an adapter's own or a state's): PEFT's
// merge, (M W^T)^T * s in M's dtype, rounded to W's.
at::Tensor boft_merged_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& boft_r,
                              const at::Tensor& boft_s);

// A linear layer's: the input rotated (boft_dropout on the rotations' blocks in training), and the
// output's bias taken out, scaled and put back; a convolution's output adapter computes the layer
// with its weight rotated and scaled. `dropout`: boft_dropout. Unchanged while disabled.
InputAdapter boft_input_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled);
OutputAdapter boft_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled);

}  // namespace acc

// Self-attention as PyTorch's nn.MultiheadAttention computes it (query = key = value = the input),
// with its parameter names (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias) so that
// state dicts move between the two, and an optional causal mask for decoder-only models.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <string>

#include "model/layer_kind.h"

namespace acc {

struct SelfAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training only
  bool bias = true;
  bool batch_first = false;  // [B, T, E] rather than PyTorch's default [T, B, E]
  bool causal = false;       // position t attends to positions <= t only
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiheadAttentionImpl(const SelfAttentionOptions& options);
  // [T, B, E] ([B, T, E] when batch_first) or unbatched [T, E]; the output has the input's shape.
  at::Tensor forward(const at::Tensor& input);
  // The same on a batch-first [B, T, E] input (what a transformer block calls).
  at::Tensor attend(const at::Tensor& x);

  SelfAttentionOptions options;
  at::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};
};
TORCH_MODULE(MultiheadAttention);

// TorchScript lines that replace batch-first `h` by its self-attention, with the parameters of the
// module at `owner` (e.g. "self" or "self.self_attn") and dropout under `self.training`.
std::vector<std::string> attention_script(const std::string& owner, const SelfAttentionOptions& options);

// Lines that turn the input `x` into batch-first `h`, and `h` back into the input's layout as `x`.
std::vector<std::string> to_batch_first_script(bool batch_first);
std::vector<std::string> from_batch_first_script(bool batch_first);

LayerKind multihead_attention_kind();

}  // namespace acc

// Multi-head attention as PyTorch's nn.MultiheadAttention computes it: self-attention (query = key
// = value = the input) or cross-attention (query from the input, key = value from another tensor,
// such as an encoder's output), with its parameter names (in_proj_weight, in_proj_bias,
// out_proj.weight, out_proj.bias) so that state dicts move between the two, with an optional causal
// mask for decoders and a key padding mask (attention_mask.h).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <string>

#include "model/adaptable_linear.h"
#include "model/layer_kind.h"

namespace acc {

struct AttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training only
  bool bias = true;
  bool batch_first = false;  // [B, T, E] rather than PyTorch's default [T, B, E]
  bool causal = false;       // position t attends to positions <= t only
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiheadAttentionImpl(const AttentionOptions& options);
  // query [T, B, E] ([B, T, E] when batch_first) or unbatched [T, E]; key_value [S, B, E] in the
  // same layout, undefined for self-attention; key_padding_mask [B, S] (unbatched [S]) or
  // undefined. The output has the query's shape.
  at::Tensor forward(const at::Tensor& query, const at::Tensor& key_value = {},
                     const at::Tensor& key_padding_mask = {});
  // The same on batch-first [B, T, E] and [B, S, E] with a checked mask [B, S] (what a transformer
  // block calls).
  at::Tensor attend(const at::Tensor& x, const at::Tensor& key_value = {}, const at::Tensor& key_padding_mask = {});

  AttentionOptions options;
  at::Tensor in_proj_weight, in_proj_bias;
  AdaptableLinear out_proj{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())}, {2, torch::nn::AnyValue(at::Tensor())})
};
TORCH_MODULE(MultiheadAttention);

// `f` applied to batch-first views of `x` and `memory` (which may be undefined), given in the
// layout that batch_first says or unbatched ([T, E]); the result comes back in x's layout.
using BatchFirstBody = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& memory)>;
at::Tensor apply_batch_first(const char* layer, bool batch_first, const at::Tensor& x, const at::Tensor& memory,
                             const BatchFirstBody& f);

// TorchScript lines that replace batch-first `h` by its attention over itself or, when `key_value`
// names a batch-first variable, over that, with the parameters of the module at `owner` (e.g.
// "self" or "self.self_attn"), the batch-first mask variable `key_padding_mask` when named, and
// dropout under `self.training`.
std::vector<std::string> attention_script(const std::string& owner, const AttentionOptions& options,
                                          const std::string& key_value = "", const std::string& key_padding_mask = "");

// Lines that turn the input `x` (and `memory`, when named) into batch-first `h` (and `m`), and the
// named key padding masks into [B, S] in place; and `h` back into the input's layout as `x`.
std::vector<std::string> to_batch_first_script(bool batch_first, const std::string& memory = "",
                                               const std::vector<std::string>& masks = {});
std::vector<std::string> from_batch_first_script(bool batch_first);

LayerKind multihead_attention_kind();

}  // namespace acc

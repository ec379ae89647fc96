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
#include "model/output_adapter.h"

namespace acc {

struct AttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training only
  bool bias = true;
  bool batch_first = false;  // [B, T, E] rather than PyTorch's default [T, B, E]
  bool causal = false;       // position t attends to positions <= t only
};

// An output adapter set on it (LoRA on the attention, PEFT's lora.MultiheadAttention) amends the packed
// q, k, v projection: its input and the projection's output (3 E wide).
class MultiheadAttentionImpl : public torch::nn::Module, public OutputAdaptable {
 public:
  explicit MultiheadAttentionImpl(const AttentionOptions& options);
  // query [T, B, E] ([B, T, E] when batch_first) or unbatched [T, E]; key_value [S, B, E] in the
  // same layout, undefined for self-attention; key_padding_mask [B, S] (unbatched [S]) or
  // undefined. The output has the query's shape.
  at::Tensor forward(const at::Tensor& query, const at::Tensor& key_value = {},
                     const at::Tensor& key_padding_mask = {});
  // The same with a checked mask [B, S] (what a transformer block calls).
  at::Tensor attend(const at::Tensor& query, const at::Tensor& key_value = {}, const at::Tensor& key_padding_mask = {});

  AttentionOptions options;
  at::Tensor in_proj_weight, in_proj_bias;
  AdaptableLinear out_proj{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())}, {2, torch::nn::AnyValue(at::Tensor())})
};
TORCH_MODULE(MultiheadAttention);

// An input of a layer: 2-D (unbatched) or 3-D, and `memory` (may be undefined) batched alike.
void require_layer_input(const char* layer, const at::Tensor& x, const at::Tensor& memory);
// `x` in the layer's layout viewed batch-first [B, T, E] (unbatched [T, E]: [1, T, E]), to check
// masks against.
at::Tensor batch_first_view(const at::Tensor& x, bool batch_first);

// TorchScript lines that replace `h` (in the layer's layout, batched or not) by its attention over
// itself or, when `key_value` names a variable in the same layout, over that, with the parameters
// of the module at `owner` (e.g. "self" or "self.self_attn"), the mask variable `key_padding_mask`
// ([B, S]) when named, and dropout under `self.training`: MultiheadAttentionImpl::attend's steps.
std::vector<std::string> attention_script(const std::string& owner, const AttentionOptions& options,
                                          const std::string& key_value = "", const std::string& key_padding_mask = "");

// Lines that make the named key padding masks [B, S] when the input `x` is unbatched.
std::vector<std::string> unbatched_masks_script(const std::vector<std::string>& masks);

LayerKind multihead_attention_kind();

}  // namespace acc

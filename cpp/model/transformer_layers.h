// nn.TransformerEncoderLayer and nn.TransformerDecoderLayer as PyTorch computes them, over our
// attention: their arguments (batch_first and norm_first included, which libtorch 1.13's C++
// layers lack), their parameter names (self_attn.*, multihead_attn.*, linear1, linear2,
// norm1..norm3) and order of initialisation, a `causal` flag on the self-attention (a GPT-style
// block is a causal encoder layer; a decoder's target mask is usually causal too) and PyTorch's key
// padding masks (src_/tgt_key_padding_mask, memory_key_padding_mask; attention_mask.h).
#pragma once

#include <torch/nn/modules/common.h>
#include <torch/nn/modules/normalization.h>

#include "model/adaptable_linear.h"
#include "model/attention.h"
#include "model/layer_kind.h"

namespace acc {

struct TransformerLayerOptions {
  AttentionOptions attention;  // embed_dim = d_model, num_heads = nhead, dropout, bias, batch_first, causal
  int64_t dim_feedforward = 2048;
  bool gelu = false;  // activation "gelu" (exact) rather than "relu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;  // pre-norm (GPT-2) rather than the post-norm of the original paper
  // A decoder layer: after self-attention, attention over `memory` (multihead_attn, norm3).
  bool cross_attention = false;
};

// One class for both: a decoder layer is an encoder layer with a cross-attention block inserted.
class TransformerLayerImpl : public torch::nn::Module {
 public:
  explicit TransformerLayerImpl(const TransformerLayerOptions& options);
  // x [T, B, E] ([B, T, E] when batch_first) or unbatched [T, E]; key_padding_mask (PyTorch's
  // src_ or tgt_key_padding_mask) [B, T] or undefined; memory (decoder layers only) [S, B, E] in x's
  // layout and its memory_key_padding_mask [B, S] or undefined. (The order of the layer spec's
  // tensor arguments, layer_kind.h.)
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_padding_mask = {}, const at::Tensor& memory = {},
                     const at::Tensor& memory_key_padding_mask = {});

  TransformerLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  AdaptableLinear linear1{nullptr}, linear2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())}, {2, torch::nn::AnyValue(at::Tensor())},
                          {3, torch::nn::AnyValue(at::Tensor())})

 private:
  // Batch first, masks checked.
  at::Tensor block(const at::Tensor& x, const at::Tensor& key_padding_mask, const at::Tensor& memory,
                   const at::Tensor& memory_key_padding_mask);
  at::Tensor dropout(const at::Tensor& x);
};
TORCH_MODULE(TransformerLayer);

LayerKind transformer_encoder_layer_kind();
LayerKind transformer_decoder_layer_kind();

}  // namespace acc

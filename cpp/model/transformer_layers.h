// nn.TransformerEncoderLayer and nn.TransformerDecoderLayer as PyTorch computes them, over our
// attention: their arguments (batch_first and norm_first included, which libtorch 1.13's C++
// layers lack), their parameter names (self_attn.*, multihead_attn.*, linear1, linear2,
// norm1..norm3) and order of initialisation, and a `causal` flag on the self-attention (a GPT-style
// block is a causal encoder layer; a decoder's target mask is usually causal too).
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
  // x [T, B, E] ([B, T, E] when batch_first) or unbatched [T, E]; memory (decoder layers only)
  // [S, B, E] in the same layout.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& memory = {});

  TransformerLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  AdaptableLinear linear1{nullptr}, linear2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())})

 private:
  at::Tensor block(const at::Tensor& x, const at::Tensor& memory);  // batch first
  at::Tensor dropout(const at::Tensor& x);
};
TORCH_MODULE(TransformerLayer);

LayerKind transformer_encoder_layer_kind();
LayerKind transformer_decoder_layer_kind();

}  // namespace acc

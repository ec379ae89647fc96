// nn.TransformerEncoderLayer as PyTorch computes it, over our self-attention: its arguments
// (batch_first and norm_first included, which libtorch 1.13's C++ TransformerEncoderLayer lacks),
// its parameter names (self_attn.*, linear1, linear2, norm1, norm2) and a `causal` flag that makes
// it a GPT-style decoder-only block.
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "model/attention.h"
#include "model/layer_kind.h"

namespace acc {

struct EncoderLayerOptions {
  SelfAttentionOptions attention;  // embed_dim = d_model, num_heads = nhead, dropout, bias, batch_first, causal
  int64_t dim_feedforward = 2048;
  bool gelu = false;  // activation "gelu" (exact) rather than "relu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;  // pre-norm (GPT-2) rather than the post-norm of the original paper
};

class TransformerEncoderLayerImpl : public torch::nn::Module {
 public:
  explicit TransformerEncoderLayerImpl(const EncoderLayerOptions& options);
  at::Tensor forward(const at::Tensor& input);

  EncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};

 private:
  at::Tensor block(const at::Tensor& x);  // batch first
  at::Tensor dropout(const at::Tensor& x);
};
TORCH_MODULE(TransformerEncoderLayer);

LayerKind transformer_encoder_layer_kind();

}  // namespace acc

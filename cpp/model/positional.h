// Position information added to a sequence of vectors [..., T, D]: learned (GPT-2's wpe, one
// vector per position, initialised as nn.Embedding) or the fixed sinusoids of "Attention Is All
// You Need" (no parameters: computed for the input's length on each call).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layer_kind.h"

namespace acc {

class PositionalEmbeddingImpl : public torch::nn::Module {
 public:
  PositionalEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;  // [num_embeddings, embedding_dim]
};
TORCH_MODULE(PositionalEmbedding);

class SinusoidalPositionalEncodingImpl : public torch::nn::Module {
 public:
  explicit SinusoidalPositionalEncodingImpl(int64_t embedding_dim) : embedding_dim(embedding_dim) {}
  at::Tensor forward(const at::Tensor& x);
  int64_t embedding_dim;
};
TORCH_MODULE(SinusoidalPositionalEncoding);

LayerKind positional_embedding_kind();
LayerKind sinusoidal_positional_encoding_kind();

}  // namespace acc

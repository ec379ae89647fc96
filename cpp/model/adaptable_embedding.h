// torch::nn::Embedding whose output an adapter may amend: LoRA's embedding(x, A^T) @ B^T * scaling as
// PEFT's Embedding adds it (model/peft/lora.h). A spec model's "embedding" layers are these, so parameters,
// names, initialisation and arithmetic are Embedding's while no adapter is set.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <utility>

#include "model/output_adapter.h"

namespace acc {

class AdaptableEmbeddingImpl : public torch::nn::EmbeddingImpl, public OutputAdaptable {
 public:
  using torch::nn::EmbeddingImpl::EmbeddingImpl;

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor output = torch::nn::EmbeddingImpl::forward(input);
    return adapted(input, output, is_training());
  }
};
TORCH_MODULE(AdaptableEmbedding);

}  // namespace acc

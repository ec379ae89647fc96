// An output projection that shares an earlier embedding's weight (GPT-2's tied lm_head): logits =
// x @ embedding.weight^T (+ bias). The weight stays one parameter, owned and named by the
// embedding layer; this layer registers only its optional bias.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "model/layer_kind.h"

namespace acc {

constexpr const char* kTiedLinear = "tied_linear";

class TiedLinearImpl : public torch::nn::Module {
 public:
  TiedLinearImpl(int64_t tie_to, bool bias);
  // Called once the layers are built: the embedding whose weight this layer reuses.
  void tie(torch::nn::Embedding source);
  at::Tensor forward(const at::Tensor& x);

  int64_t tie_to;
  at::Tensor bias;  // [num_embeddings], created by tie(); undefined without bias

 private:
  bool with_bias_;
  torch::nn::Embedding source_{nullptr};  // not a child: its weight must not be listed twice
};
TORCH_MODULE(TiedLinear);

LayerKind tied_linear_kind();

}  // namespace acc

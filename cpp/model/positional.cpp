#include "model/positional.h"

#include <cmath>

#include "common/error.h"

namespace acc {
namespace {

void require_sequence(const at::Tensor& x, int64_t dim, const char* layer) {
  require(x.dim() >= 2 && x.size(-1) == dim, layer, ": expected an input [..., time, ", dim, "], got ", x.sizes());
  require(x.is_floating_point(), layer, ": expected a floating input (embed the tokens first), got ",
          x.scalar_type());
}

}  // namespace

PositionalEmbeddingImpl::PositionalEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim) {
  weight = register_parameter("weight", torch::empty({num_embeddings, embedding_dim}));
  torch::NoGradGuard no_grad;
  weight.normal_(0, 1);  // nn.Embedding's initialisation
}

at::Tensor PositionalEmbeddingImpl::forward(const at::Tensor& x) {
  require_sequence(x, weight.size(1), "positional_embedding");
  const int64_t t = x.size(-2);
  require(t <= weight.size(0), "positional_embedding: a sequence of ", t, " positions is longer than num_embeddings (",
          weight.size(0), ")");
  return x + weight.narrow(0, 0, t);
}

at::Tensor SinusoidalPositionalEncodingImpl::forward(const at::Tensor& x) {
  require_sequence(x, embedding_dim, "sinusoidal_positional_encoding");
  const auto f32 = x.options().dtype(at::kFloat);
  const at::Tensor position = at::arange(x.size(-2), f32).unsqueeze(1);
  // PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)), computed in float32.
  const at::Tensor frequency = at::exp(at::arange(0, embedding_dim, 2, f32) * (-std::log(10000.0) / embedding_dim));
  const at::Tensor angle = position * frequency;
  const at::Tensor pe = at::stack({angle.sin(), angle.cos()}, -1).flatten(-2).narrow(-1, 0, embedding_dim);
  return x + pe.to(x.scalar_type());
}

LayerKind positional_embedding_kind() {
  return {{{"num_embeddings", Arg::Int, nullptr}, {"embedding_dim", Arg::Int, nullptr}},
          [](const nlohmann::json& a) {
            return torch::nn::AnyModule(PositionalEmbedding(a["num_embeddings"].get<int64_t>(), a["embedding_dim"].get<int64_t>()));
          },
          [](const nlohmann::json&) { return std::string("return x + self.weight[:x.size(-2)]"); }};
}

LayerKind sinusoidal_positional_encoding_kind() {
  return {{{"embedding_dim", Arg::Int, nullptr}},
          [](const nlohmann::json& a) {
            return torch::nn::AnyModule(SinusoidalPositionalEncoding(a["embedding_dim"].get<int64_t>()));
          },
          [](const nlohmann::json& a) {
            const std::string d = script_int(a["embedding_dim"]);
            return script_lines({
                "position = torch.arange(x.size(-2), device=x.device).float().unsqueeze(1)",
                "frequency = torch.exp(torch.arange(0, " + d + ", 2, device=x.device).float() * " +
                    script_float(-std::log(10000.0) / a["embedding_dim"].get<double>()) + ")",
                "angle = position * frequency",
                "pe = torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)[:, :" + d + "]",
                "return x + pe.to(x.dtype)",
            });
          }};
}

}  // namespace acc

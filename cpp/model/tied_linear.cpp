#include "model/tied_linear.h"

#include <cmath>

#include "common/error.h"

namespace acc {

TiedLinearImpl::TiedLinearImpl(int64_t tie_to_, bool bias) : tie_to(tie_to_), with_bias_(bias) {}

void TiedLinearImpl::tie(torch::nn::Embedding source) {
  source_ = std::move(source);
  if (!with_bias_ || bias.defined()) return;
  // nn.Linear's bias initialisation, with the embedding's width as fan-in.
  bias = register_parameter("bias", torch::empty({source_->weight.size(0)}));
  const double bound = 1.0 / std::sqrt(static_cast<double>(source_->weight.size(1)));
  torch::NoGradGuard no_grad;
  bias.uniform_(-bound, bound);
}

at::Tensor TiedLinearImpl::forward(const at::Tensor& x) {
  require(!source_.is_empty(), "tied_linear: not tied to an embedding");
  const at::Tensor& weight = source_->weight;  // read each call: it may have been moved or replaced
  require(x.dim() >= 1 && x.size(-1) == weight.size(1), "tied_linear: expected an input [..., ", weight.size(1),
          "] (the width of embedding layer ", tie_to, "), got ", x.sizes());
  return at::linear(x, weight, bias);
}

LayerKind tied_linear_kind() {
  return {{{"tie_to", Arg::Int, nullptr}, {"bias", Arg::Bool, false}},
          [](const nlohmann::json& a) {
            return torch::nn::AnyModule(TiedLinear(a["tie_to"].get<int64_t>(), a["bias"].get<bool>()));
          },
          // The saved module's forward takes the embedding's weight as a second argument.
          [](const nlohmann::json& a) {
            return std::string("return torch.linear(x, weight, ") + (a["bias"].get<bool>() ? "self.bias" : "None") +
                   ")";
          }};
}

}  // namespace acc

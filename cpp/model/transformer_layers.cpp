#include "model/transformer_layers.h"

#include "common/error.h"

namespace acc {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const EncoderLayerOptions& o) : options(o) {
  const int64_t d = o.attention.embed_dim;
  const bool bias = o.attention.bias;
  // Construction order is PyTorch's, so the generator's draws go to the same tensors.
  self_attn = register_module("self_attn", MultiheadAttention(o.attention));
  linear1 = register_module("linear1", torch::nn::Linear(torch::nn::LinearOptions(d, o.dim_feedforward).bias(bias)));
  linear2 = register_module("linear2", torch::nn::Linear(torch::nn::LinearOptions(o.dim_feedforward, d).bias(bias)));
  auto norm = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(o.layer_norm_eps)); };
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
}

at::Tensor TransformerEncoderLayerImpl::dropout(const at::Tensor& x) {
  const double p = options.attention.dropout;
  return p > 0 ? at::dropout(x, p, is_training()) : x;
}

at::Tensor TransformerEncoderLayerImpl::block(const at::Tensor& x) {
  auto attention = [&](const at::Tensor& h) { return dropout(self_attn->attend(h)); };
  auto feed_forward = [&](const at::Tensor& h) {
    at::Tensor inner = linear1->forward(h);
    inner = options.gelu ? at::gelu(inner) : at::relu(inner);
    return dropout(linear2->forward(dropout(inner)));
  };
  if (options.norm_first) {
    at::Tensor h = x + attention(norm1->forward(x));
    return h + feed_forward(norm2->forward(h));
  }
  at::Tensor h = norm1->forward(x + attention(x));
  return norm2->forward(h + feed_forward(h));
}

at::Tensor TransformerEncoderLayerImpl::forward(const at::Tensor& input) {
  require(input.dim() == 2 || input.dim() == 3, "transformer_encoder_layer: expected a 2-D or 3-D input, got ",
          input.sizes());
  if (input.dim() == 2) return block(input.unsqueeze(0)).squeeze(0);
  if (options.attention.batch_first) return block(input);
  return block(input.transpose(0, 1)).transpose(0, 1);
}

namespace {

EncoderLayerOptions encoder_options(const nlohmann::json& a) {
  EncoderLayerOptions o;
  o.attention.embed_dim = a["d_model"];
  o.attention.num_heads = a["nhead"];
  o.attention.dropout = a["dropout"];
  o.attention.bias = true;  // PyTorch 2.1's `bias` would also drop the norms' biases, which libtorch's LayerNorm keeps
  o.attention.batch_first = a["batch_first"];
  o.attention.causal = a["causal"];
  o.dim_feedforward = a["dim_feedforward"];
  const std::string activation = a["activation"];
  require(activation == "relu" || activation == "gelu",
          "transformer_encoder_layer: activation must be \"relu\" or \"gelu\", got \"", activation, "\"");
  o.gelu = activation == "gelu";
  o.layer_norm_eps = a["layer_norm_eps"];
  o.norm_first = a["norm_first"];
  return o;
}

std::string encoder_script(const EncoderLayerOptions& o) {
  const std::string d = std::to_string(o.attention.embed_dim), eps = script_float(o.layer_norm_eps);
  const std::string drop = o.attention.dropout > 0 ? script_float(o.attention.dropout) : "";
  auto dropped = [&](const std::string& v) {
    return drop.empty() ? v : "torch.dropout(" + v + ", " + drop + ", self.training)";
  };
  auto norm = [&](const char* which, const std::string& v) {
    const std::string n = std::string("self.") + which;
    const std::string bias = o.attention.bias ? n + ".bias" : "None";
    return "torch.layer_norm(" + v + ", [" + d + "], " + n + ".weight, " + bias + ", " + eps + ", False)";
  };
  auto linear = [&](const char* which, const std::string& v) {
    const std::string n = std::string("self.") + which;
    return "torch.linear(" + v + ", " + n + ".weight, " + (o.attention.bias ? n + ".bias" : "None") + ")";
  };
  const std::string activation = o.gelu ? "torch.gelu" : "torch.relu";
  auto feed_forward = [&](const std::string& v) {
    return dropped(linear("linear2", dropped(activation + "(" + linear("linear1", v) + ")")));
  };
  auto lines = to_batch_first_script(o.attention.batch_first);
  lines.push_back("y = h");
  if (o.norm_first) lines.push_back("h = " + norm("norm1", "y"));
  for (auto& line : attention_script("self.self_attn", o.attention)) lines.push_back(line);
  if (o.norm_first) {
    lines.push_back("h = y + " + dropped("h"));
    lines.push_back("h = h + " + feed_forward(norm("norm2", "h")));
  } else {
    lines.push_back("h = " + norm("norm1", "y + " + dropped("h")));
    lines.push_back("h = " + norm("norm2", "h + " + feed_forward("h")));
  }
  for (auto& line : from_batch_first_script(o.attention.batch_first)) lines.push_back(line);
  lines.push_back("return x");
  return script_lines(lines);
}

}  // namespace

LayerKind transformer_encoder_layer_kind() {
  return {{{"d_model", Arg::Int, nullptr},
           {"nhead", Arg::Int, nullptr},
           {"dim_feedforward", Arg::Int, 2048},
           {"dropout", Arg::Float, 0.1},
           {"activation", Arg::String, "relu"},
           {"layer_norm_eps", Arg::Float, 1e-5},
           {"batch_first", Arg::Bool, false},
           {"norm_first", Arg::Bool, false},
           {"causal", Arg::Bool, false}},
          [](const nlohmann::json& a) { return torch::nn::AnyModule(TransformerEncoderLayer(encoder_options(a))); },
          [](const nlohmann::json& a) { return encoder_script(encoder_options(a)); }};
}

}  // namespace acc

#include "model/attention.h"

#include <torch/nn/init.h>

#include <cmath>
#include <limits>

#include "common/error.h"

namespace acc {

MultiheadAttentionImpl::MultiheadAttentionImpl(const SelfAttentionOptions& o) : options(o) {
  const int64_t e = o.embed_dim;
  require(e > 0 && o.num_heads > 0 && e % o.num_heads == 0, "multihead_attention: embed_dim (", e,
          ") must be divisible by num_heads (", o.num_heads, ")");
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * e, e}));
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", torch::empty({3 * e}));
  // PyTorch's order of draws: out_proj's own Linear initialisation, then Xavier for the packed
  // projection; both biases start at zero.
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(e, e).bias(o.bias)));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight);
  if (o.bias) {
    in_proj_bias.zero_();
    out_proj->bias.zero_();
  }
}

at::Tensor MultiheadAttentionImpl::attend(const at::Tensor& x) {
  require(x.dim() == 3 && x.size(2) == options.embed_dim, "multihead_attention: expected [batch, time, ",
          options.embed_dim, "] (batch first), got ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1), e = options.embed_dim, heads = options.num_heads;
  const int64_t d = e / heads;
  auto qkv = at::linear(x, in_proj_weight, in_proj_bias).chunk(3, -1);
  auto split = [&](const at::Tensor& p) { return p.reshape({b, t, heads, d}).transpose(1, 2); };  // [B, H, T, d]
  at::Tensor scores = at::matmul(split(qkv[0]) / std::sqrt(static_cast<double>(d)), split(qkv[1]).transpose(-2, -1));
  if (options.causal) {
    auto future = at::ones({t, t}, x.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  at::Tensor weights = at::softmax(scores, -1);
  if (options.dropout > 0) weights = at::dropout(weights, options.dropout, is_training());
  at::Tensor out = at::matmul(weights, split(qkv[2])).transpose(1, 2).reshape({b, t, e});
  return out_proj->forward(out);
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& input) {
  require(input.dim() == 2 || input.dim() == 3, "multihead_attention: expected a 2-D or 3-D input, got ",
          input.sizes());
  if (input.dim() == 2) return attend(input.unsqueeze(0)).squeeze(0);
  if (options.batch_first) return attend(input);
  return attend(input.transpose(0, 1)).transpose(0, 1);
}

std::vector<std::string> attention_script(const std::string& owner, const SelfAttentionOptions& o) {
  const std::string heads = std::to_string(o.num_heads), d = std::to_string(o.embed_dim / o.num_heads);
  const std::string e = std::to_string(o.embed_dim);
  const std::string bias_in = o.bias ? owner + ".in_proj_bias" : "None";
  const std::string bias_out = o.bias ? owner + ".out_proj.bias" : "None";
  std::vector<std::string> lines = {
      "b = h.size(0)",
      "t = h.size(1)",
      "qkv = torch.linear(h, " + owner + ".in_proj_weight, " + bias_in + ").chunk(3, -1)",
      "q = qkv[0].reshape([b, t, " + heads + ", " + d + "]).transpose(1, 2)",
      "k = qkv[1].reshape([b, t, " + heads + ", " + d + "]).transpose(1, 2)",
      "v = qkv[2].reshape([b, t, " + heads + ", " + d + "]).transpose(1, 2)",
      "s = torch.matmul(q / " + script_float(std::sqrt(static_cast<double>(o.embed_dim / o.num_heads))) +
          ", k.transpose(-2, -1))",
  };
  if (o.causal)
    lines.push_back(
        "s = s + torch.full([t, t], float(\"-inf\"), dtype=s.dtype, device=s.device).triu(1)");
  lines.push_back("a = torch.softmax(s, -1)");
  if (o.dropout > 0) lines.push_back("a = torch.dropout(a, " + script_float(o.dropout) + ", self.training)");
  lines.push_back("h = torch.matmul(a, v).transpose(1, 2).reshape([b, t, " + e + "])");
  lines.push_back("h = torch.linear(h, " + owner + ".out_proj.weight, " + bias_out + ")");
  return lines;
}

std::vector<std::string> to_batch_first_script(bool batch_first) {
  return {"unbatched = x.dim() == 2", "if unbatched:", "    h = x.unsqueeze(0)",
          batch_first ? "else:\n        h = x" : "else:\n        h = x.transpose(0, 1)"};
}

std::vector<std::string> from_batch_first_script(bool batch_first) {
  return {"if unbatched:", "    x = h.squeeze(0)",
          batch_first ? "else:\n        x = h" : "else:\n        x = h.transpose(0, 1)"};
}

namespace {

SelfAttentionOptions attention_options(const nlohmann::json& a) {
  SelfAttentionOptions o;
  o.embed_dim = a["embed_dim"];
  o.num_heads = a["num_heads"];
  o.dropout = a["dropout"];
  o.bias = a["bias"];
  o.batch_first = a["batch_first"];
  o.causal = a["causal"];
  return o;
}

}  // namespace

LayerKind multihead_attention_kind() {
  return {{{"embed_dim", Arg::Int, nullptr},
           {"num_heads", Arg::Int, nullptr},
           {"dropout", Arg::Float, 0.0},
           {"bias", Arg::Bool, true},
           {"batch_first", Arg::Bool, false},
           {"causal", Arg::Bool, false}},
          [](const nlohmann::json& a) { return torch::nn::AnyModule(MultiheadAttention(attention_options(a))); },
          [](const nlohmann::json& a) {
            const SelfAttentionOptions o = attention_options(a);
            auto lines = to_batch_first_script(o.batch_first);
            for (auto& line : attention_script("self", o)) lines.push_back(line);
            for (auto& line : from_batch_first_script(o.batch_first)) lines.push_back(line);
            lines.push_back("return x");
            return script_lines(lines);
          }};
}

}  // namespace acc

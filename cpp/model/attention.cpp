#include "model/attention.h"

#include <torch/nn/init.h>

#include <cmath>

#include "common/compat.h"
#include "common/error.h"
#include "model/attention_mask.h"

namespace acc {

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& o) : options(o) {
  const int64_t e = o.embed_dim;
  require(e > 0 && o.num_heads > 0 && e % o.num_heads == 0, "multihead_attention: embed_dim (", e,
          ") must be divisible by num_heads (", o.num_heads, ")");
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * e, e}));
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", torch::empty({3 * e}));
  // PyTorch's order of draws: out_proj's own Linear initialisation, then Xavier for the packed
  // projection; both biases start at zero.
  out_proj = register_module("out_proj", AdaptableLinear(torch::nn::LinearOptions(e, e).bias(o.bias)));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight);
  if (o.bias) {
    in_proj_bias.zero_();
    out_proj->bias.zero_();
  }
}

at::Tensor MultiheadAttentionImpl::attend(const at::Tensor& x, const at::Tensor& key_value,
                                          const at::Tensor& key_padding_mask) {
  const int64_t e = options.embed_dim, heads = options.num_heads, d = e / heads;
  require(x.dim() == 3 && x.size(2) == e, "multihead_attention: expected a query [batch, time, ", e,
          "] (batch first), got ", x.sizes());
  const bool cross = key_value.defined();
  require(!cross || (key_value.dim() == 3 && key_value.size(0) == x.size(0) && key_value.size(2) == e),
          "multihead_attention: expected keys and values [", x.size(0), ", length, ", e, "] (batch first), got ",
          cross ? key_value.sizes() : x.sizes());
  const int64_t b = x.size(0), t = x.size(1), s = cross ? key_value.size(1) : t;
  std::vector<at::Tensor> q_kv;  // the packed projection: one product over itself, or q and k|v apart
  if (cross) {
    // PyTorch's split for encoder-decoder attention: the query's rows, then keys' and values'.
    auto w = in_proj_weight.split_with_sizes({e, 2 * e});
    auto bias = in_proj_bias.defined() ? in_proj_bias.split_with_sizes({e, 2 * e}) : std::vector<at::Tensor>(2);
    q_kv = at::linear(key_value, w[1], bias[1]).chunk(2, -1);
    q_kv.insert(q_kv.begin(), at::linear(x, w[0], bias[0]));
  } else {
    q_kv = at::linear(x, in_proj_weight, in_proj_bias).chunk(3, -1);
  }
  // Heads batched as [B * H, n, d] for bmm, as PyTorch lays them out (fewer operations than a 4-D matmul).
  auto split = [&](const at::Tensor& p, int64_t n) {
    return p.reshape({b, n, heads, d}).transpose(1, 2).reshape({b * heads, n, d});
  };
  const at::Tensor q = split(q_kv[0], t) / std::sqrt(static_cast<double>(d)), k = split(q_kv[1], s).transpose(1, 2);
  // The masks are added by the product itself (PyTorch's baddbmm).
  const at::Tensor bias = attention_bias(options.causal, key_padding_mask, heads, t, s, q.options());
  const at::Tensor scores = bias.defined() ? at::baddbmm(bias, q, k) : at::bmm(q, k);
  at::Tensor weights = compat::attention_softmax(scores);
  if (options.dropout > 0) weights = at::dropout(weights, options.dropout, is_training());
  at::Tensor out = at::bmm(weights, split(q_kv[2], s)).view({b, heads, t, d}).transpose(1, 2).reshape({b, t, e});
  return out_proj->forward(out);
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& query, const at::Tensor& key_value,
                                           const at::Tensor& key_padding_mask) {
  const char* layer = "multihead_attention";
  return apply_batch_first(layer, options.batch_first, query, key_value, [&](const at::Tensor& x, const at::Tensor& m) {
    const at::Tensor& keys = m.defined() ? m : x;
    return attend(x, m, checked_key_padding_mask(layer, "key_padding_mask", key_padding_mask, query.dim() == 2, keys));
  });
}

at::Tensor apply_batch_first(const char* layer, bool batch_first, const at::Tensor& x, const at::Tensor& memory,
                             const BatchFirstBody& f) {
  require(x.dim() == 2 || x.dim() == 3, layer, ": expected a 2-D or 3-D input, got ", x.sizes());
  require(!memory.defined() || memory.dim() == x.dim(), layer, ": the memory (", memory.sizes(),
          ") must be batched as the input is (", x.sizes(), ")");
  auto in = [&](const at::Tensor& t) {
    if (!t.defined() || (batch_first && t.dim() == 3)) return t;
    return t.dim() == 2 ? t.unsqueeze(0) : t.transpose(0, 1);
  };
  at::Tensor y = f(in(x), in(memory));
  if (x.dim() == 2) return y.squeeze(0);
  return batch_first ? y : y.transpose(0, 1);
}

std::vector<std::string> attention_script(const std::string& owner, const AttentionOptions& o,
                                          const std::string& key_value, const std::string& key_padding_mask) {
  const std::string heads = std::to_string(o.num_heads), d = std::to_string(o.embed_dim / o.num_heads);
  const std::string e = std::to_string(o.embed_dim), e2 = std::to_string(2 * o.embed_dim);
  const std::string bias_out = o.bias ? owner + ".out_proj.bias" : "None";
  std::vector<std::string> lines = {"b = h.size(0)", "t = h.size(1)"};
  if (key_value.empty()) {
    lines.push_back("n = t");
    lines.push_back("qkv = torch.linear(h, " + owner + ".in_proj_weight, " + (o.bias ? owner + ".in_proj_bias" : "None") +
                    ").chunk(3, -1)");
  } else {
    lines.push_back("n = " + key_value + ".size(1)");
    lines.push_back("pw = " + owner + ".in_proj_weight.split_with_sizes([" + e + ", " + e2 + "])");
    const std::string bq = o.bias ? "pb[0]" : "None", bkv = o.bias ? "pb[1]" : "None";
    if (o.bias) lines.push_back("pb = " + owner + ".in_proj_bias.split_with_sizes([" + e + ", " + e2 + "])");
    lines.push_back("kv = torch.linear(" + key_value + ", pw[1], " + bkv + ").chunk(2, -1)");
    lines.push_back("qkv = [torch.linear(h, pw[0], " + bq + "), kv[0], kv[1]]");
  }
  const std::string bh = "b * " + heads;
  lines.insert(lines.end(), {
      "q = qkv[0].reshape([b, t, " + heads + ", " + d + "]).transpose(1, 2).reshape([" + bh + ", t, " + d + "])",
      "k = qkv[1].reshape([b, n, " + heads + ", " + d + "]).transpose(1, 2).reshape([" + bh + ", n, " + d + "])",
      "v = qkv[2].reshape([b, n, " + heads + ", " + d + "]).transpose(1, 2).reshape([" + bh + ", n, " + d + "])",
      "q = q / " + script_float(std::sqrt(static_cast<double>(o.embed_dim / o.num_heads))),
  });
  const auto bias = attention_bias_script(o.causal, key_padding_mask, o.num_heads);
  lines.insert(lines.end(), bias.begin(), bias.end());
  lines.push_back(bias.empty() ? "s = torch.bmm(q, k.transpose(1, 2))"
                               : "s = torch.baddbmm(bias, q, k.transpose(1, 2))");
  lines.push_back(std::string("a = ") + compat::kAttentionSoftmaxScript + "(s, -1)");
  if (o.dropout > 0) lines.push_back("a = torch.dropout(a, " + script_float(o.dropout) + ", self.training)");
  lines.push_back("h = torch.bmm(a, v).view([b, " + heads + ", t, " + d + "]).transpose(1, 2).reshape([b, t, " + e + "])");
  lines.push_back("h = torch.linear(h, " + owner + ".out_proj.weight, " + bias_out + ")");
  return lines;
}

std::vector<std::string> to_batch_first_script(bool batch_first, const std::string& memory,
                                               const std::vector<std::string>& masks) {
  std::vector<std::string> lines = {"unbatched = x.dim() == 2", "if unbatched:", "    h = x.unsqueeze(0)"};
  if (!memory.empty()) lines.push_back("    m = " + memory + ".unsqueeze(0)");
  for (const auto& mask : masks) lines.push_back("    " + mask + " = " + mask + ".unsqueeze(0)");
  lines.push_back("else:");
  lines.push_back(batch_first ? "    h = x" : "    h = x.transpose(0, 1)");
  if (!memory.empty()) lines.push_back("    m = " + memory + (batch_first ? "" : ".transpose(0, 1)"));
  return lines;
}

std::vector<std::string> from_batch_first_script(bool batch_first) {
  return {"if unbatched:", "    x = h.squeeze(0)", batch_first ? "else:\n        x = h" : "else:\n        x = h.transpose(0, 1)"};
}

namespace {

AttentionOptions attention_options(const nlohmann::json& a) {
  AttentionOptions o;
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
           {"causal", Arg::Bool, false},
           {"key_value", Arg::Source, nullptr},  // cross-attention's keys and values; null: self-attention
           {"key_padding_mask", Arg::Source, nullptr}},
          [](const nlohmann::json& a) { return torch::nn::AnyModule(MultiheadAttention(attention_options(a))); },
          [](const nlohmann::json& a) {
            const AttentionOptions o = attention_options(a);
            const bool cross = !a["key_value"].is_null(), padded = !a["key_padding_mask"].is_null();
            const std::vector<std::string> masks(padded ? 1 : 0, "key_padding_mask");
            auto lines = to_batch_first_script(o.batch_first, cross ? "key_value" : "", masks);
            for (auto& line : attention_script("self", o, cross ? "m" : "", padded ? masks[0] : ""))
              lines.push_back(line);
            for (auto& line : from_batch_first_script(o.batch_first)) lines.push_back(line);
            lines.push_back("return x");
            return script_lines(lines);
          }};
}

}  // namespace acc

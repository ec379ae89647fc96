#include "model/attention.h"

#include <torch/nn/init.h>

#include <cmath>
#include <limits>

#include "common/compat.h"
#include "common/error.h"
#include "model/attention_mask.h"

namespace acc {

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& o) : options(o) {
  const int64_t e = o.embed_dim;
  require(e > 0 && o.num_heads > 0 && e % o.num_heads == 0, "multihead_attention: embed_dim (", e,
          ") must be divisible by num_heads (", o.num_heads, ")");
  // The packed q, k, v projection holds 3 e rows: a size past that is no size at all.
  require(e <= std::numeric_limits<int64_t>::max() / 3, "multihead_attention: embed_dim ", e, " is too large");
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

at::Tensor MultiheadAttentionImpl::attend(const at::Tensor& query, const at::Tensor& key_value,
                                          const at::Tensor& key_padding_mask) {
  const int64_t e = options.embed_dim, heads = options.num_heads, d = e / heads;
  // As nn.MultiheadAttention: a batch-first input is viewed sequence-first and an unbatched one gets
  // a batch of one, so the projections run over the rows in PyTorch's order (their weight
  // gradients sum the rows in that order).
  const bool batched = query.dim() == 3, cross = key_value.defined();
  auto sequence_first = [&](const at::Tensor& t) {
    return !batched ? t.unsqueeze(1) : options.batch_first ? t.transpose(1, 0) : t;
  };
  const at::Tensor x = sequence_first(query), memory = cross ? sequence_first(key_value) : at::Tensor();
  const char* layout = options.batch_first ? "[batch, time, " : "[time, batch, ";
  require(x.size(2) == e, "multihead_attention: expected a query ", layout, e, "], got ", query.sizes());
  require(!cross || (memory.size(1) == x.size(1) && memory.size(2) == e), "multihead_attention: expected keys and ",
          "values in the query's layout ", layout, e, "] with its batch, got ",
          cross ? key_value.sizes() : query.sizes());
  const int64_t t = x.size(0), b = x.size(1), s = cross ? memory.size(0) : t;
  std::vector<at::Tensor> q_kv;  // the packed projection: one product over itself, or q and k|v apart
  if (cross && has_output_adapter()) {
    // An adapter amends all 3 E rows of a projection: the query's, and the keys' and values'.
    const at::Tensor q = adapted(x, at::linear(x, in_proj_weight, in_proj_bias), is_training()).narrow(-1, 0, e);
    q_kv = adapted(memory, at::linear(memory, in_proj_weight, in_proj_bias), is_training())
               .narrow(-1, e, 2 * e)
               .chunk(2, -1);
    q_kv.insert(q_kv.begin(), q);
  } else if (!batched && !has_output_adapter()) {
    // PyTorch's unbatched input: query, key and value each get their batch of one apart, so they are
    // no longer one tensor and each is projected by its own third of the weights (the input's
    // gradient then sums three products).
    auto w = in_proj_weight.chunk(3);
    auto bias = in_proj_bias.defined() ? in_proj_bias.chunk(3) : std::vector<at::Tensor>(3);
    const at::Tensor& keys = cross ? memory : x;
    q_kv = {at::linear(x, w[0], bias[0]), at::linear(keys, w[1], bias[1]), at::linear(keys, w[2], bias[2])};
  } else if (cross) {
    // PyTorch's split for encoder-decoder attention: the query's rows, then keys' and values'.
    auto w = in_proj_weight.split_with_sizes({e, 2 * e});
    auto bias = in_proj_bias.defined() ? in_proj_bias.split_with_sizes({e, 2 * e}) : std::vector<at::Tensor>(2);
    q_kv = at::linear(memory, w[1], bias[1]).chunk(2, -1);
    q_kv.insert(q_kv.begin(), at::linear(x, w[0], bias[0]));
  } else {
    q_kv = adapted(x, at::linear(x, in_proj_weight, in_proj_bias), is_training()).chunk(3, -1);
  }
  // Heads as [B * H, n, d] views of [n, B * H, d], as PyTorch lays them out for bmm.
  auto split = [&](const at::Tensor& p, int64_t n) { return p.contiguous().view({n, b * heads, d}).transpose(0, 1); };
  const at::Tensor q = split(q_kv[0], t), k = split(q_kv[1], s), v = split(q_kv[2], s);
  const at::Tensor bias = attention_bias(options.causal, key_padding_mask, heads, t, s, q.options());
#if ACC_TORCH_VERSION >= 200
  // PyTorch 2.x (need_weights=False, as transformer layers ask): scaled_dot_product_attention over
  // [B, H, n, d] views, the mask as [1, 1, T, S] or [B, H, T or 1, S]; the heads back as rows
  // [T * B, E].
  c10::optional<at::Tensor> mask;
  if (bias.defined()) {
    const at::Tensor three_d = bias.dim() == 2 ? bias.unsqueeze(0) : bias;
    mask = three_d.size(0) == 1 ? three_d.unsqueeze(0) : three_d.view({b, heads, -1, s});
  }
  const at::Tensor heads_out =
      at::scaled_dot_product_attention(q.view({b, heads, t, d}), k.view({b, heads, s, d}), v.view({b, heads, s, d}),
                                       mask, is_training() ? options.dropout : 0.0)
          .permute({2, 0, 1, 3})
          .contiguous()
          .view({t * b, e});
#else
  // PyTorch 1.13's reference path: the masks added by the product itself (baddbmm).
  const at::Tensor scaled = q / std::sqrt(static_cast<double>(d)), keys = k.transpose(1, 2);
  const at::Tensor scores = bias.defined() ? at::baddbmm(bias, scaled, keys) : at::bmm(scaled, keys);
  at::Tensor weights = at::softmax(scores, -1);
  if (options.dropout > 0) weights = at::dropout(weights, options.dropout, is_training());
  const at::Tensor heads_out = at::bmm(weights, v).transpose(0, 1).contiguous().view({t * b, e});
#endif
  const at::Tensor out = out_proj->forward(heads_out).view({t, b, e});
  return !batched ? out.squeeze(1) : options.batch_first ? out.transpose(1, 0) : out;
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& query, const at::Tensor& key_value,
                                           const at::Tensor& key_padding_mask) {
  const char* layer = "multihead_attention";
  require_layer_input(layer, query, key_value);
  const at::Tensor& keys = key_value.defined() ? key_value : query;
  return attend(query, key_value,
                checked_key_padding_mask(layer, "key_padding_mask", key_padding_mask, query.dim() == 2,
                                         batch_first_view(keys, options.batch_first)));
}

void require_layer_input(const char* layer, const at::Tensor& x, const at::Tensor& memory) {
  require(x.dim() == 2 || x.dim() == 3, layer, ": expected a 2-D or 3-D input, got ", x.sizes());
  require(!memory.defined() || memory.dim() == x.dim(), layer, ": the memory (", memory.sizes(),
          ") must be batched as the input is (", x.sizes(), ")");
}

at::Tensor batch_first_view(const at::Tensor& x, bool batch_first) {
  if (x.dim() == 2) return x.unsqueeze(0);
  return batch_first ? x : x.transpose(0, 1);
}

std::vector<std::string> attention_script(const std::string& owner, const AttentionOptions& o,
                                          const std::string& key_value, const std::string& key_padding_mask) {
  const std::string heads = std::to_string(o.num_heads), d = std::to_string(o.embed_dim / o.num_heads);
  const std::string e = std::to_string(o.embed_dim), e2 = std::to_string(2 * o.embed_dim);
  const std::string bias_out = o.bias ? owner + ".out_proj.bias" : "None";
  const bool cross = !key_value.empty();
  // attend()'s steps: sequence-first views, PyTorch's projections and head layout, the way back.
  const std::string to_sequence_first = o.batch_first ? ".transpose(1, 0)" : "";
  std::vector<std::string> lines = {"batched = h.dim() == 3", "if batched:", "    hs = h" + to_sequence_first};
  if (cross) lines.push_back("    ms = " + key_value + to_sequence_first);
  lines.push_back("else:");
  lines.push_back("    hs = h.unsqueeze(1)");
  if (cross) lines.push_back("    ms = " + key_value + ".unsqueeze(1)");
  lines.insert(lines.end(), {"t = hs.size(0)", "b = hs.size(1)"});
  lines.push_back("n = " + std::string(cross ? "ms.size(0)" : "t"));
  // Unbatched: each of q, k, v projected by its own third of the weights (attend() says why).
  const std::string keys = cross ? "ms" : "hs";
  lines.push_back("if not batched:");
  lines.push_back("    pw3 = " + owner + ".in_proj_weight.chunk(3)");
  if (o.bias) lines.push_back("    pb3 = " + owner + ".in_proj_bias.chunk(3)");
  std::string apart = "    qkv = [";
  for (int i = 0; i < 3; ++i)
    apart += std::string(i ? ", " : "") + "torch.linear(" + (i ? keys : "hs") + ", pw3[" + std::to_string(i) + "], " +
             (o.bias ? "pb3[" + std::to_string(i) + "]" : "None") + ")";
  lines.push_back(apart + "]");
  lines.push_back("else:");
  if (!cross) {
    lines.push_back("    qkv = torch.linear(hs, " + owner + ".in_proj_weight, " +
                    (o.bias ? owner + ".in_proj_bias" : "None") + ").chunk(3, -1)");
  } else {
    lines.push_back("    pw = " + owner + ".in_proj_weight.split_with_sizes([" + e + ", " + e2 + "])");
    const std::string bq = o.bias ? "pb[0]" : "None", bkv = o.bias ? "pb[1]" : "None";
    if (o.bias) lines.push_back("    pb = " + owner + ".in_proj_bias.split_with_sizes([" + e + ", " + e2 + "])");
    lines.push_back("    kv = torch.linear(ms, pw[1], " + bkv + ").chunk(2, -1)");
    lines.push_back("    qkv = [torch.linear(hs, pw[0], " + bq + "), kv[0], kv[1]]");
  }
  const std::string bh = "b * " + heads;
  for (const char* name : {"q", "k", "v"}) {
    const std::string length = name[0] == 'q' ? "t" : "n", source = name[0] == 'q' ? "0" : name[0] == 'k' ? "1" : "2";
    lines.push_back(std::string(name) + " = qkv[" + source + "].contiguous().view([" + length + ", " + bh + ", " + d +
                    "]).transpose(0, 1)");
  }
  const auto bias = attention_bias_script(o.causal, key_padding_mask, o.num_heads);
  lines.insert(lines.end(), bias.begin(), bias.end());
#if ACC_TORCH_VERSION >= 200
  const std::string view4 = "b, " + heads + ", ";
  std::string mask = "None";
  if (!bias.empty()) {
    lines.insert(lines.end(), {"if bias.dim() == 2:", "    bias = bias.unsqueeze(0)", "if bias.size(0) == 1:",
                               "    bias = bias.unsqueeze(0)", "else:", "    bias = bias.view([" + view4 + "-1, n])"});
    mask = "bias";
  }
  const std::string dropout = o.dropout > 0 ? script_float(o.dropout) + " if self.training else 0.0" : "0.0";
  lines.push_back("o = torch.scaled_dot_product_attention(q.view([" + view4 + "t, " + d + "]), k.view([" + view4 +
                  "n, " + d + "]), v.view([" + view4 + "n, " + d + "]), " + mask + ", " + dropout + ")");
  lines.push_back("o = o.permute(2, 0, 1, 3).contiguous().view([t * b, " + e + "])");
#else
  lines.push_back("q = q / " + script_float(std::sqrt(static_cast<double>(o.embed_dim / o.num_heads))));
  lines.push_back(bias.empty() ? "s = torch.bmm(q, k.transpose(1, 2))"
                               : "s = torch.baddbmm(bias, q, k.transpose(1, 2))");
  lines.push_back("a = torch.softmax(s, -1)");
  if (o.dropout > 0) lines.push_back("a = torch.dropout(a, " + script_float(o.dropout) + ", self.training)");
  lines.push_back("o = torch.bmm(a, v).transpose(0, 1).contiguous().view([t * b, " + e + "])");
#endif
  lines.push_back("o = torch.linear(o, " + owner + ".out_proj.weight, " + bias_out + ").view([t, b, " + e + "])");
  lines.insert(lines.end(), {"if batched:", "    h = o" + to_sequence_first, "else:", "    h = o.squeeze(1)"});
  return lines;
}

std::vector<std::string> unbatched_masks_script(const std::vector<std::string>& masks) {
  std::vector<std::string> lines;
  if (masks.empty()) return lines;
  lines.push_back("if x.dim() == 2:");
  for (const auto& mask : masks) lines.push_back("    " + mask + " = " + mask + ".unsqueeze(0)");
  return lines;
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
            auto lines = unbatched_masks_script(masks);
            lines.push_back("h = x");
            for (auto& line : attention_script("self", o, cross ? "key_value" : "", padded ? masks[0] : ""))
              lines.push_back(line);
            lines.push_back("return h");
            return script_lines(lines);
          }};
}

}  // namespace acc

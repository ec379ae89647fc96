#include "model/transformer_layers.h"

#include "common/error.h"
#include "model/attention_mask.h"
#include "model/layer_norm_without_bias.h"

namespace acc {

TransformerLayerImpl::TransformerLayerImpl(const TransformerLayerOptions& o) : options(o) {
  const int64_t d = o.attention.embed_dim;
  const bool bias = o.attention.bias;
  // Construction order is PyTorch's, so the generator's draws go to the same tensors.
  self_attn = register_module("self_attn", MultiheadAttention(o.attention));
  if (o.cross_attention) {
    AttentionOptions cross = o.attention;
    cross.causal = false;  // PyTorch's memory_mask: none
    multihead_attn = register_module("multihead_attn", MultiheadAttention(cross));
  }
  linear1 = register_module("linear1", AdaptableLinear(torch::nn::LinearOptions(d, o.dim_feedforward).bias(bias)));
  linear2 = register_module("linear2", AdaptableLinear(torch::nn::LinearOptions(o.dim_feedforward, d).bias(bias)));
  auto norm = [&] {
    torch::nn::LayerNorm made(torch::nn::LayerNormOptions({d}).eps(o.layer_norm_eps));
    if (!bias) without_bias(*made);  // PyTorch 2.1's bias=False drops the norms' biases too
    return made;
  };
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
  if (o.cross_attention) norm3 = register_module("norm3", norm());
}

at::Tensor TransformerLayerImpl::dropout(const at::Tensor& x) {
  const double p = options.attention.dropout;
  return p > 0 ? at::dropout(x, p, is_training()) : x;
}

at::Tensor TransformerLayerImpl::block(const at::Tensor& x, const at::Tensor& key_padding_mask,
                                       const at::Tensor& memory, const at::Tensor& memory_key_padding_mask) {
  auto attention = [&](const at::Tensor& h) { return dropout(self_attn->attend(h, {}, key_padding_mask)); };
  auto cross = [&](const at::Tensor& h) { return dropout(multihead_attn->attend(h, memory, memory_key_padding_mask)); };
  auto feed_forward = [&](const at::Tensor& h) {
    at::Tensor inner = linear1->forward(h);
    inner = options.gelu ? at::gelu(inner) : at::relu(inner);
    return dropout(linear2->forward(dropout(inner)));
  };
  const bool decoder = options.cross_attention;
  torch::nn::LayerNorm& last_norm = decoder ? norm3 : norm2;
  if (options.norm_first) {  // the memory is not normalised, as in PyTorch
    at::Tensor h = x + attention(norm1->forward(x));
    if (decoder) h = h + cross(norm2->forward(h));
    return h + feed_forward(last_norm->forward(h));
  }
  at::Tensor h = norm1->forward(x + attention(x));
  if (decoder) h = norm2->forward(h + cross(h));
  return last_norm->forward(h + feed_forward(h));
}

at::Tensor TransformerLayerImpl::forward(const at::Tensor& x, const at::Tensor& key_padding_mask,
                                         const at::Tensor& memory, const at::Tensor& memory_key_padding_mask) {
  const bool decoder = options.cross_attention;
  const char* layer = decoder ? "transformer_decoder_layer" : "transformer_encoder_layer";
  require(memory.defined() == decoder && (decoder || !memory_key_padding_mask.defined()), layer,
          decoder ? ": needs the memory it attends to" : ": takes no memory");
  const char* mask = decoder ? "tgt_key_padding_mask" : "src_key_padding_mask";
  require_layer_input(layer, x, memory);
  const bool unbatched = x.dim() == 2, batch_first = options.attention.batch_first;
  // The block runs in the input's layout, as PyTorch's does: its linear layers sum their rows, and
  // dropout draws its masks, in that order.
  return block(x, checked_key_padding_mask(layer, mask, key_padding_mask, unbatched, batch_first_view(x, batch_first)),
               memory,
               decoder ? checked_key_padding_mask(layer, "memory_key_padding_mask", memory_key_padding_mask, unbatched,
                                                  batch_first_view(memory, batch_first))
                       : at::Tensor());
}

namespace {

TransformerLayerOptions layer_options(const nlohmann::json& a, bool decoder) {
  TransformerLayerOptions o;
  o.attention.embed_dim = a["d_model"];
  o.attention.num_heads = a["nhead"];
  o.attention.dropout = a["dropout"];
  o.attention.bias = a["bias"];  // PyTorch 2.1's: every linear layer's and norm's
  o.attention.batch_first = a["batch_first"];
  o.attention.causal = a["causal"];
  o.dim_feedforward = a["dim_feedforward"];
  const std::string activation = a["activation"];
  require(activation == "relu" || activation == "gelu", decoder ? "transformer_decoder_layer" : "transformer_encoder_layer",
          ": activation must be \"relu\" or \"gelu\", got \"", activation, "\"");
  o.gelu = activation == "gelu";
  o.layer_norm_eps = a["layer_norm_eps"];
  o.norm_first = a["norm_first"];
  o.cross_attention = decoder;
  return o;
}

// The masks are the names of the forward's mask arguments, empty when absent.
std::string layer_script(const TransformerLayerOptions& o, const std::string& mask, const std::string& memory_mask) {
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
  const bool decoder = o.cross_attention;
  const char* last_norm = decoder ? "norm3" : "norm2";
  std::vector<std::string> masks;
  for (const auto& name : {mask, memory_mask})
    if (!name.empty()) masks.push_back(name);
  auto lines = unbatched_masks_script(masks);
  auto append = [&](const std::vector<std::string>& more) { lines.insert(lines.end(), more.begin(), more.end()); };
  // In the input's layout. Each attention block reads `h` and leaves its output there; `y` holds the
  // residual stream.
  lines.push_back("y = x");
  lines.push_back(o.norm_first ? "h = " + norm("norm1", "y") : "h = y");
  append(attention_script("self.self_attn", o.attention, "", mask));
  lines.push_back(o.norm_first ? "y = y + " + dropped("h") : "y = " + norm("norm1", "y + " + dropped("h")));
  if (decoder) {
    AttentionOptions cross = o.attention;
    cross.causal = false;
    lines.push_back(o.norm_first ? "h = " + norm("norm2", "y") : "h = y");
    append(attention_script("self.multihead_attn", cross, "memory", memory_mask));
    lines.push_back(o.norm_first ? "y = y + " + dropped("h") : "y = " + norm("norm2", "y + " + dropped("h")));
  }
  lines.push_back(o.norm_first ? "h = y + " + feed_forward(norm(last_norm, "y"))
                               : "h = " + norm(last_norm, "y + " + feed_forward("y")));
  lines.push_back("return h");
  return script_lines(lines);
}

std::vector<ArgSpec> layer_args() {
  return {{"d_model", Arg::Int, nullptr},    {"nhead", Arg::Int, nullptr},        {"dim_feedforward", Arg::Int, 2048},
          {"dropout", Arg::Float, 0.1},      {"activation", Arg::String, "relu"}, {"layer_norm_eps", Arg::Float, 1e-5},
          {"batch_first", Arg::Bool, false}, {"norm_first", Arg::Bool, false},    {"bias", Arg::Bool, true},
          {"causal", Arg::Bool, false}};
}

LayerKind layer_kind(bool decoder) {
  auto args = layer_args();
  // In TransformerLayerImpl::forward's order. The memory (nn.TransformerDecoderLayer.forward(tgt,
  // memory)) is by default the model's second input; the masks are read only when named.
  const char* mask = decoder ? "tgt_key_padding_mask" : "src_key_padding_mask";
  args.push_back({mask, Arg::Source, nullptr});
  if (decoder) {
    args.push_back({"memory", Arg::Source, nlohmann::json{{"input", 1}}});
    args.push_back({"memory_key_padding_mask", Arg::Source, nullptr});
  }
  auto named = [](const nlohmann::json& a, const char* name) {
    return a.value(name, nlohmann::json()).is_null() ? "" : name;
  };
  return {args,
          [decoder](const nlohmann::json& a) { return torch::nn::AnyModule(TransformerLayer(layer_options(a, decoder))); },
          [decoder, mask, named](const nlohmann::json& a) {
            return layer_script(layer_options(a, decoder), named(a, mask), named(a, "memory_key_padding_mask"));
          }};
}

}  // namespace

LayerKind transformer_encoder_layer_kind() { return layer_kind(false); }
LayerKind transformer_decoder_layer_kind() { return layer_kind(true); }

}  // namespace acc

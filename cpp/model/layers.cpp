#include "model/layers.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/json_input.h"
#include "model/adaptable_conv2d.h"
#include "model/adaptable_embedding.h"
#include "model/adaptable_linear.h"
#include "model/attention.h"
#include "model/layer_kind.h"
#include "model/layer_norm_without_bias.h"
#include "model/positional.h"
#include "model/rms_norm.h"
#include "model/tied_linear.h"
#include "model/transformer_layers.h"

namespace acc {
namespace {

using nlohmann::json;

// Short names for the TorchScript literals of layer_kind.h.
std::string f(double v) { return script_float(v); }
std::string b(bool v) { return script_bool(v); }
std::string pair(const json& v) {
  auto p = v.get<std::vector<int64_t>>();
  return "[" + std::to_string(p[0]) + ", " + std::to_string(p[1]) + "]";
}
std::string list(const json& v) {
  std::string out = "[";
  for (auto& x : v) out += (out.size() > 1 ? ", " : "") + std::to_string(x.get<int64_t>());
  return out + "]";
}
// nn.Conv2d's _reversed_padding_repeated_twice (F.pad's order: the last dimension first): a
// padding's numbers, or for "same" the total d (k - 1) split with the odd one after.
std::vector<int64_t> reversed_padding_twice(const json& a) {
  std::vector<int64_t> pads;
  for (int i = 1; i >= 0; --i) {
    if (a["padding"].is_string()) {
      const int64_t total = a["dilation"][i].get<int64_t>() * (a["kernel_size"][i].get<int64_t>() - 1);
      pads.insert(pads.end(), {total / 2, total - total / 2});
    } else {
      pads.insert(pads.end(), 2, a["padding"][i].get<int64_t>());
    }
  }
  return pads;
}

torch::ExpandingArray<2> ea2(const json& v) {
  auto p = v.get<std::vector<int64_t>>();
  return torch::ExpandingArray<2>({p[0], p[1]});
}

// Batch norm is the same layer in 1d and 2d except for the module class and the accepted rank.
LayerKind batchnorm_kind(bool two_d) {
  return {
      {{"num_features", Arg::Int, nullptr},
       {"eps", Arg::Float, 1e-5},
       {"momentum", Arg::OptionalFloat, 0.1},  // null: a cumulative average, as PyTorch's None
       {"affine", Arg::Bool, true},
       {"track_running_stats", Arg::Bool, true}},
      [two_d](const json& a) {
        torch::nn::BatchNormOptions options(a["num_features"]);
        options.eps(a["eps"]).affine(a["affine"]).track_running_stats(a["track_running_stats"]);
        options.momentum(a["momentum"].is_null() ? c10::nullopt : c10::optional<double>(a["momentum"].get<double>()));
        if (two_d) return torch::nn::AnyModule(torch::nn::BatchNorm2d(options));
        return torch::nn::AnyModule(torch::nn::BatchNorm1d(options));
      },
      [](const json& a) {
        const bool affine = a["affine"], tracked = a["track_running_stats"], cumulative = a["momentum"].is_null();
        std::string body;
        // Momentum None: the k-th batch weighs 1 / k (PyTorch's exponential_average_factor).
        if (cumulative) body += "factor = 0.0\n    ";
        if (tracked) body += "if self.training:\n        self.num_batches_tracked.add_(1)\n    ";
        if (tracked && cumulative) body += "    factor = 1.0 / float(self.num_batches_tracked)\n    ";
        body += "return torch.batch_norm(x, ";
        body += affine ? "self.weight, self.bias, " : "None, None, ";
        body += tracked ? "self.running_mean, self.running_var, self.training, " : "None, None, True, ";
        body += (cumulative ? std::string("factor") : f(a["momentum"])) + ", " + f(a["eps"]) + ", False)";
        return body;
      }};
}

const std::map<std::string, LayerKind>& layer_kinds() {
  static const std::map<std::string, LayerKind> kinds = {
      {"linear",
       {{{"in_features", Arg::Int, nullptr}, {"out_features", Arg::Int, nullptr}, {"bias", Arg::Bool, true}},
        [](const json& a) {
          return torch::nn::AnyModule(AdaptableLinear(
              torch::nn::LinearOptions(a["in_features"], a["out_features"]).bias(a["bias"].get<bool>())));
        },
        [](const json& a) {
          return std::string("return torch.linear(x, self.weight, ") + (a["bias"].get<bool>() ? "self.bias" : "None") +
                 ")";
        }}},
      {"conv2d",
       {{{"in_channels", Arg::Int, nullptr},
         {"out_channels", Arg::Int, nullptr},
         {"kernel_size", Arg::IntOrPair, nullptr},
         {"stride", Arg::IntOrPair, 1},
         {"padding", Arg::Padding, 0},
         {"dilation", Arg::IntOrPair, 1},
         {"groups", Arg::Int, 1},
         {"bias", Arg::Bool, true},
         {"padding_mode", Arg::String, "zeros"}},
        [](const json& a) {
          const bool same = a["padding"].is_string();
          auto options = torch::nn::Conv2dOptions(a["in_channels"], a["out_channels"], ea2(a["kernel_size"]))
                             .stride(ea2(a["stride"]))
                             .dilation(ea2(a["dilation"]))
                             .groups(a["groups"])
                             .bias(a["bias"].get<bool>());
          const std::string mode = a["padding_mode"];
          if (mode != "zeros")  // the layer pads its input itself (AdaptableConv2dImpl)
            options.padding(torch::ExpandingArray<2>({0, 0}));
          else if (same)
            options.padding(torch::kSame);
          else
            options.padding(ea2(a["padding"]));
          // (no numbers for "same": adapters refuse the layer, as they refuse a TorchScript one)
          return torch::nn::AnyModule(
              AdaptableConv2d(options, same ? std::vector<int64_t>{} : a["padding"].get<std::vector<int64_t>>(), mode,
                              mode == "zeros" ? std::vector<int64_t>{} : reversed_padding_twice(a)));
        },
        [](const json& a) {
          const std::string mode = a["padding_mode"], bias = a["bias"].get<bool>() ? "self.bias" : "None";
          const std::string tail = pair(a["dilation"]) + ", " + std::to_string(a["groups"].get<int64_t>()) + ")";
          if (mode != "zeros")  // nn.Conv2d's _conv_forward: the input padded by F.pad, then no padding
            return "return torch.conv2d(torch.pad(x, " + list(json(reversed_padding_twice(a))) + ", \"" + mode +
                   "\"), self.weight, " + bias + ", " + pair(a["stride"]) + ", [0, 0], " + tail;
          const std::string padding = a["padding"].is_string() ? "\"same\"" : pair(a["padding"]);
          return "return torch.conv2d(x, self.weight, " + bias + ", " + pair(a["stride"]) + ", " + padding + ", " +
                 tail;
        }}},
      {"maxpool2d",
       {{{"kernel_size", Arg::IntOrPair, nullptr},
         {"stride", Arg::IntOrPair, "kernel_size"},
         {"padding", Arg::IntOrPair, 0},
         {"dilation", Arg::IntOrPair, 1},
         {"ceil_mode", Arg::Bool, false}},
        [](const json& a) {
          return torch::nn::AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(ea2(a["kernel_size"]))
                                                               .stride(ea2(a["stride"]))
                                                               .padding(ea2(a["padding"]))
                                                               .dilation(ea2(a["dilation"]))
                                                               .ceil_mode(a["ceil_mode"].get<bool>())));
        },
        [](const json& a) {
          return "return torch.max_pool2d(x, " + pair(a["kernel_size"]) + ", " + pair(a["stride"]) + ", " +
                 pair(a["padding"]) + ", " + pair(a["dilation"]) + ", " + b(a["ceil_mode"]) + ")";
        }}},
      {"avgpool2d",
       {{{"kernel_size", Arg::IntOrPair, nullptr},
         {"stride", Arg::IntOrPair, "kernel_size"},
         {"padding", Arg::IntOrPair, 0},
         {"ceil_mode", Arg::Bool, false},
         {"count_include_pad", Arg::Bool, true}},
        [](const json& a) {
          return torch::nn::AnyModule(
              torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(ea2(a["kernel_size"]))
                                       .stride(ea2(a["stride"]))
                                       .padding(ea2(a["padding"]))
                                       .ceil_mode(a["ceil_mode"].get<bool>())
                                       .count_include_pad(a["count_include_pad"].get<bool>())));
        },
        [](const json& a) {
          return "return torch.avg_pool2d(x, " + pair(a["kernel_size"]) + ", " + pair(a["stride"]) + ", " +
                 pair(a["padding"]) + ", " + b(a["ceil_mode"]) + ", " + b(a["count_include_pad"]) + ")";
        }}},
      {"flatten",
       {{{"start_dim", Arg::Int, 1}, {"end_dim", Arg::Int, -1}},
        [](const json& a) {
          return torch::nn::AnyModule(
              torch::nn::Flatten(torch::nn::FlattenOptions().start_dim(a["start_dim"]).end_dim(a["end_dim"])));
        },
        [](const json& a) {
          return "return torch.flatten(x, " + std::to_string(a["start_dim"].get<int64_t>()) + ", " +
                 std::to_string(a["end_dim"].get<int64_t>()) + ")";
        }}},
      {"relu",
       {{},
        [](const json&) { return torch::nn::AnyModule(torch::nn::ReLU()); },
        [](const json&) { return std::string("return torch.relu(x)"); }}},
      {"gelu",
       {{{"approximate", Arg::String, "none"}},
        [](const json& a) {
          return torch::nn::AnyModule(
              torch::nn::GELU(torch::nn::GELUOptions().approximate(a["approximate"].get<std::string>())));
        },
        [](const json& a) {
          return "return torch.gelu(x, approximate=\"" + a["approximate"].get<std::string>() + "\")";
        }}},
      {"tanh",
       {{},
        [](const json&) { return torch::nn::AnyModule(torch::nn::Tanh()); },
        [](const json&) { return std::string("return torch.tanh(x)"); }}},
      {"sigmoid",
       {{},
        [](const json&) { return torch::nn::AnyModule(torch::nn::Sigmoid()); },
        [](const json&) { return std::string("return torch.sigmoid(x)"); }}},
      {"softmax",
       {{{"dim", Arg::Int, nullptr}},
        [](const json& a) { return torch::nn::AnyModule(torch::nn::Softmax(a["dim"].get<int64_t>())); },
        [](const json& a) { return "return torch.softmax(x, " + std::to_string(a["dim"].get<int64_t>()) + ")"; }}},
      {"logsoftmax",
       {{{"dim", Arg::Int, nullptr}},
        [](const json& a) { return torch::nn::AnyModule(torch::nn::LogSoftmax(a["dim"].get<int64_t>())); },
        [](const json& a) { return "return torch.log_softmax(x, " + std::to_string(a["dim"].get<int64_t>()) + ")"; }}},
      {"dropout",
       {{{"p", Arg::Float, 0.5}},
        [](const json& a) { return torch::nn::AnyModule(torch::nn::Dropout(a["p"].get<double>())); },
        [](const json& a) { return "return torch.dropout(x, " + f(a["p"]) + ", self.training)"; }}},
      {"layernorm",
       {{{"normalized_shape", Arg::IntList, nullptr},
         {"eps", Arg::Float, 1e-5},
         {"elementwise_affine", Arg::Bool, true},
         {"bias", Arg::Bool, true}},  // PyTorch 2.1's: false keeps the weight alone
        [](const json& a) {
          torch::nn::LayerNorm norm(torch::nn::LayerNormOptions(a["normalized_shape"].get<std::vector<int64_t>>())
                                        .eps(a["eps"])
                                        .elementwise_affine(a["elementwise_affine"].get<bool>()));
          if (!a["bias"].get<bool>()) without_bias(*norm);
          return torch::nn::AnyModule(norm);
        },
        [](const json& a) {
          const bool affine = a["elementwise_affine"], bias = a["bias"];
          return "return torch.layer_norm(x, " + list(a["normalized_shape"]) + ", " +
                 (affine ? std::string("self.weight, ") + (bias ? "self.bias, " : "None, ") : "None, None, ") +
                 f(a["eps"]) + ", False)";
        }}},
      {"batchnorm1d", batchnorm_kind(false)},
      {"multihead_attention", multihead_attention_kind()},
      {"transformer_encoder_layer", transformer_encoder_layer_kind()},
      {"transformer_decoder_layer", transformer_decoder_layer_kind()},
      {"positional_embedding", positional_embedding_kind()},
      {"sinusoidal_positional_encoding", sinusoidal_positional_encoding_kind()},
      {"rmsnorm", rmsnorm_kind()},
      {kTiedLinear, tied_linear_kind()},
      {"batchnorm2d", batchnorm_kind(true)},
      {"embedding",
       {{{"num_embeddings", Arg::Int, nullptr},
         {"embedding_dim", Arg::Int, nullptr},
         {"padding_idx", Arg::OptionalInt, nullptr}},
        [](const json& a) {
          torch::nn::EmbeddingOptions options(a["num_embeddings"], a["embedding_dim"]);
          if (!a["padding_idx"].is_null()) options.padding_idx(a["padding_idx"].get<int64_t>());
          return torch::nn::AnyModule(AdaptableEmbedding(options));
        },
        [](const json& a) {
          int64_t padding = -1;
          if (!a["padding_idx"].is_null()) {
            padding = a["padding_idx"];
            if (padding < 0) padding += a["num_embeddings"].get<int64_t>();
          }
          return "return torch.embedding(self.weight, x, " + std::to_string(padding) + ", False, False)";
        }}},
  };
  return kinds;
}

const LayerKind& find_kind(const std::string& type) {
  auto it = layer_kinds().find(type);
  if (it == layer_kinds().end()) {
    std::string known;
    for (auto& kind : layer_kinds()) known += (known.empty() ? "" : ", ") + kind.first;
    fail(Status::InvalidArgument, "unknown layer type '", type, "' (known: ", known, ")");
  }
  return it->second;
}

// A whole number a size can be: JSON integers above INT64_MAX would wrap to negative sizes.
bool is_int64(const json& value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

TensorSource checked_source(const json& value, const std::string& where, const std::string& name) {
  // A model takes at most kMaxModelInputs inputs (forward's argument list).
  const bool ok = value.is_object() && value.size() == 1 && (value.contains("input") || value.contains("layer")) &&
                  is_int64(*value.begin()) && value.begin()->get<int64_t>() >= 0 &&
                  (value.contains("layer") || value.begin()->get<int64_t>() < kMaxModelInputs);
  require(ok, where, ": '", name, "' must be {\"input\": k} (the model's input k < ", kMaxModelInputs,
          ") or {\"layer\": i} (layer i's output), got ",
          value.dump());
  return {value.contains("input"), value.begin()->get<int64_t>()};
}

json checked_arg(const ArgSpec& spec, const json& value, const std::string& where) {
  auto bad = [&](const char* expected) {
    fail(Status::InvalidArgument, where, ": argument '", spec.name, "' must be ", expected, ", got ", value.dump());
  };
  switch (spec.kind) {
    case Arg::Int:
      if (!is_int64(value)) bad("an integer");
      return value;
    case Arg::OptionalInt:
      if (!value.is_null() && !is_int64(value)) bad("an integer or null");
      return value;
    case Arg::Float:
      if (!value.is_number()) bad("a number");
      return value.get<double>();
    case Arg::OptionalFloat:
      if (!value.is_null() && !value.is_number()) bad("a number or null");
      return value.is_null() ? value : json(value.get<double>());
    case Arg::Bool:
      if (!value.is_boolean()) bad("true or false");
      return value;
    case Arg::String:
      if (!value.is_string()) bad("a string");
      return value;
    case Arg::Padding:
      if (value == "same") return value;
      if (value == "valid") return json::array({0, 0});
      if (value.is_string()) bad("an integer, a pair of integers, \"same\" or \"valid\"");
      [[fallthrough]];
    case Arg::IntOrPair:
      if (is_int64(value)) return json::array({value, value});
      if (value.is_array() && value.size() == 2 && is_int64(value[0]) && is_int64(value[1]))
        return value;
      bad("an integer or a pair of integers");
    case Arg::IntList:
      if (is_int64(value)) return json::array({value});
      if (value.is_array() && !value.empty()) {
        for (auto& x : value)
          if (!is_int64(x)) bad("an integer or a list of integers");
        return value;
      }
      bad("an integer or a list of integers");
    case Arg::Source:
      if (!value.is_null()) checked_source(value, where, spec.name);
      return value;
  }
  fail(Status::Internal, "unhandled argument kind");
}

void require_positive(const json& args, const char* name, const std::string& where) {
  if (!args.contains(name) || args[name].is_null()) return;
  auto check = [&](const json& v) {
    require(v.is_number() && v.get<double>() > 0, where, ": argument '", name, "' must be positive, got ", v.dump());
  };
  if (args[name].is_array())
    for (auto& v : args[name]) check(v);
  else
    check(args[name]);
}

}  // namespace

std::vector<LayerSpec> parse_layer_specs(const std::string& json_spec) {
  const json root = parse_json_input(json_spec, "model spec");
  require(root.is_array() && !root.empty(), "model spec must be a non-empty JSON array of layers");
  std::vector<LayerSpec> specs;
  for (size_t i = 0; i < root.size(); ++i) {
    const json& layer = root[i];
    std::string where = concat("layer ", i);
    require(layer.is_object() && layer.contains("type") && layer["type"].is_string(), where,
            ": each layer must be an object with a string \"type\"");
    LayerSpec spec;
    spec.type = layer["type"].get<std::string>();
    spec.args = json::object();
    where += concat(" (", spec.type, ")");
    const LayerKind& kind = find_kind(spec.type);
    if (layer.contains("checkpoint")) {
      require(layer["checkpoint"].is_boolean(), where, ": 'checkpoint' must be true or false");
      spec.checkpoint = layer["checkpoint"].get<bool>();
    }
    spec.inputs.push_back(layer.contains("from") ? checked_source(layer["from"], where, "from")
                          : i == 0             ? TensorSource{true, 0}
                                               : TensorSource{false, static_cast<int64_t>(i) - 1});
    spec.input_names.push_back("x");
    spec.slots.push_back(0);
    for (auto& item : layer.items()) {
      if (item.key() == "type" || item.key() == "checkpoint" || item.key() == "from") continue;
      bool known = false;
      for (auto& arg : kind.args) known = known || item.key() == arg.name;
      if (!known) {
        std::string names;
        for (auto& arg : kind.args) names += (names.empty() ? "" : ", ") + std::string(arg.name);
        fail(Status::InvalidArgument, where, ": unknown argument '", item.key(), "' (accepted: ",
             names.empty() ? "none" : names, ")");
      }
    }
    for (auto& arg : kind.args) {
      // (null for a pooling's stride is PyTorch's None: the kernel's size)
      const bool defaulted = arg.fallback.is_string() && arg.kind == Arg::IntOrPair;
      if (layer.contains(arg.name) && !(defaulted && layer[arg.name].is_null())) {
        spec.args[arg.name] = checked_arg(arg, layer[arg.name], where);
      } else if (defaulted) {
        spec.args[arg.name] = spec.args[arg.fallback.get<std::string>()];  // stride defaults to kernel_size
      } else if (!arg.fallback.is_null() || arg.kind == Arg::OptionalInt || arg.kind == Arg::OptionalFloat ||
                 arg.kind == Arg::Source) {
        spec.args[arg.name] = checked_arg(arg, arg.fallback, where);
      } else {
        fail(Status::InvalidArgument, where, ": missing required argument '", arg.name, "'");
      }
    }
    size_t slot = 0;
    for (auto& arg : kind.args) {
      if (arg.kind != Arg::Source) continue;
      ++slot;
      if (spec.args[arg.name].is_null()) continue;
      spec.inputs.push_back(checked_source(spec.args[arg.name], where, arg.name));
      spec.input_names.push_back(arg.name);
      spec.slots.push_back(slot);
    }
    for (const auto& source : spec.inputs)
      require(source.model_input || static_cast<size_t>(source.index) < i, where,
              ": a layer reads only earlier layers' outputs, not layer ", source.index, "'s");
    for (const char* name : {"in_features", "out_features", "in_channels", "out_channels", "kernel_size", "stride",
                             "dilation", "groups", "num_features", "num_embeddings", "embedding_dim",
                             "normalized_shape", "embed_dim", "num_heads", "d_model", "nhead", "dim_feedforward",
                             "layer_norm_eps"})
      require_positive(spec.args, name, where);
    for (const char* name : {"p", "dropout"})
      if (spec.args.contains(name) && spec.args[name].is_number())
        require(spec.args[name].get<double>() >= 0 && spec.args[name].get<double>() <= 1, where, ": argument '", name,
                "' must be in [0, 1]");
    for (const auto& heads : {std::make_pair("embed_dim", "num_heads"), std::make_pair("d_model", "nhead")})
      if (spec.args.contains(heads.first))
        require(spec.args[heads.first].get<int64_t>() % spec.args[heads.second].get<int64_t>() == 0, where,
                ": argument '", heads.first, "' must be divisible by '", heads.second, "'");
    if (spec.type == "transformer_encoder_layer" || spec.type == "transformer_decoder_layer") {
      auto activation = spec.args["activation"].get<std::string>();
      require(activation == "relu" || activation == "gelu", where, ": activation must be \"relu\" or \"gelu\"");
    }
    if (spec.type == "conv2d") {
      const std::string mode = spec.args["padding_mode"];
      require(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", where,
              ": padding_mode must be zeros, reflect, replicate or circular, got '", mode, "'");
    }
    if (spec.type == "conv2d" && spec.args["padding"].is_string())
      require(spec.args["stride"] == json::array({1, 1}), where,
              ": padding \"same\" takes no stride but 1 (as PyTorch's Conv2d)");
    if (spec.type == "multihead_attention")
      require(!spec.args["causal"].get<bool>() || spec.args["key_value"].is_null(), where,
              ": 'causal' masks self-attention; cross-attention (with 'key_value') takes no causal mask");
    if (spec.type == kTiedLinear) {
      const int64_t source = spec.args["tie_to"];
      require(source >= 0 && static_cast<size_t>(source) < i && specs[static_cast<size_t>(source)].type == "embedding",
              where, ": 'tie_to' must be the index of an earlier embedding layer, got ", source);
    }
    if (spec.type == "gelu") {
      auto mode = spec.args["approximate"].get<std::string>();
      require(mode == "none" || mode == "tanh", where, ": approximate must be \"none\" or \"tanh\"");
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

size_t model_input_count(const std::vector<LayerSpec>& layers) {
  size_t count = 1;
  for (const auto& layer : layers)
    for (const auto& source : layer.inputs)
      if (source.model_input) count = std::max(count, static_cast<size_t>(source.index) + 1);
  return count;
}

torch::nn::AnyModule build_layer(const LayerSpec& spec) { return find_kind(spec.type).build(spec.args); }

std::string layer_script(const LayerSpec& spec) { return find_kind(spec.type).script(spec.args); }

}  // namespace acc

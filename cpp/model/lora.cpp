#include "model/lora.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/json_input.h"
#include "common/module_regex.h"
#include "common/text.h"
#include "common/utf8.h"

namespace acc {
namespace {

constexpr const char* kMagnitudeSuffix = ".lora_magnitude_vector";  // PEFT's name in its files

// nn.Linear(in, out, bias=False)'s own initialisation, which PEFT's adapters go through first.
at::Tensor new_linear_weight(int64_t out, int64_t in) {
  at::Tensor w = at::empty({out, in}, at::kFloat);
  torch::nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  return w;
}

// The weight delta (B A) * scaling, as PEFT's get_delta_weight computes it.
at::Tensor lora_delta(const at::Tensor& a, const at::Tensor& b, double scaling) { return at::matmul(b, a) * scaling; }

// PEFT's merge of lora_bias: the layer's bias plus lora_B's times the scaling, in the bias's dtype.
at::Tensor adapted_bias(const at::Tensor& bias, const at::Tensor& b_bias, double scaling) {
  return (bias + b_bias * scaling).to(bias.scalar_type());
}

// DoRA's row norms ||W + scaling * lora_weight|| (PEFT's get_weight_norm), in the sum's dtype.
at::Tensor weight_norm(const at::Tensor& w, const at::Tensor& lora_weight, double scaling) {
  const at::Tensor sum = w + lora_weight * scaling;
  return at::linalg_vector_norm(sum, 2, {1}, false, c10::nullopt).to(sum.scalar_type());
}

// DoRA's magnitude at the start (PEFT's DoraLinearLayer.update_layer): the adapted weight's row
// norms, lora_weight as lora_B @ lora_A.
at::Tensor initial_magnitude(const at::Tensor& w, const LoraAdapter& adapter) {
  at::NoGradGuard no_grad;
  return weight_norm(w, at::matmul(adapter.b, adapter.a), adapter.scaling);
}

// PEFT's DoraLinearVariant.forward and DoraLinearLayer.forward on the layer's output: result +
// (m / ||W + s B A|| - 1) * base + m / ||W + s B A|| * B(A(x)) * s, the norm not differentiated;
// base is the layer's output without its bias, or with dropout in training W applied to the
// dropped-out input. B A is taken as PEFT takes it, lora_B(lora_A(I))^T.
OutputAdapter dora_output_adapter(const LoraAdapter& adapter, double p) {
  return [a = adapter.a, b = adapter.b, m = adapter.magnitude, w = adapter.site.weight, bias = adapter.site.bias,
          scaling = adapter.scaling, p](const at::Tensor& input, const at::Tensor& output, bool training) {
    at::Tensor x = input.to(a.scalar_type());
    at::Tensor base;
    if (p > 0 && training) {
      x = at::dropout(x, p, training);
      base = at::linear(x, w.to(x.scalar_type()));
    } else {
      base = bias.defined() ? output - bias : output;
    }
    const at::Tensor eye = at::eye(a.size(1), a.options().requires_grad(false));
    const at::Tensor lora_weight = at::linear(at::linear(eye, a), b).t().to(x.scalar_type());
    const at::Tensor norm = weight_norm(w.to(x.scalar_type()), lora_weight.detach(), scaling).detach();
    const at::Tensor scale = (m / norm).view({1, -1});
    const at::Tensor dora = (scale - 1) * base + scale * at::linear(at::linear(x, a), b) * scaling;
    return (output + dora).to(output.scalar_type());
  };
}

// PEFT's module list in this library's text form: names separated by commas, or "re:" followed by
// a regular expression (handed to `set_regex`). It is written into adapter_config.json: UTF-8 only.
void read_module_names(const char* key, const std::string& text, std::vector<std::string>* names,
                       const std::function<void(const std::string&)>& set_regex) {
  require(is_utf8(text), key, " '", printable_utf8(text), "' is not valid UTF-8");
  if (text.rfind("re:", 0) == 0) return set_regex(text.substr(3));
  for (const auto& name : split_trimmed(text, ',')) {
    require(!name.empty(), key, " '", text, "' has an empty name");
    names->push_back(name);
  }
}

// A pattern option's JSON object ({"expression": value, ...}), each entry handed to `add` in the
// text's order.
void read_patterns(const std::string& text, const char* key,
                   const std::function<void(const std::string&, const nlohmann::ordered_json&)>& add) {
  if (trimmed(text).empty()) return;
  const nlohmann::ordered_json j = parse_ordered_json_input(text, key);
  require(j.is_object(), key, " must be a JSON object from module-name expressions to values, e.g. {\"q_proj\": 16}");
  for (const auto& [expression, value] : j.items()) add(expression, value);
}

}  // namespace

const OptionTable<LoraConfig>& lora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Lora, [](OptionTable<L>& t) {
    t.bind("r", "the adapters' rank", &L::r).at_least(1).at_most(kMaxLoraRank);
    // At most float's largest: the scaling multiplies float32 outputs (an inf would make 0 * inf NaNs).
    t.bind("lora_alpha", "the scaling is lora_alpha / r", &L::alpha).at_least(0).at_most(kMaxLoraAlpha);
    t.bind("lora_dropout", "dropout on the adapted layer's input", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("use_rslora", "scale by lora_alpha / sqrt(r)", &L::use_rslora);
    t.bind("use_dora", "DoRA: train a magnitude per output beside the adapters", &L::use_dora);
    t.bind("lora_bias", "lora_B has a trained bias too", &L::lora_bias);
    t.bind("init_lora_weights", "Kaiming A and zero B (true), N(0, 1/r) A (gaussian), or nn.Linear's", &L::init)
        .one_of({"true", "gaussian", "false"});
    t.bind("exclude_modules", "modules left unadapted, named as target_modules are", &L::exclude_spec);
    t.bind("modules_to_save", "modules trained whole beside the adapters and saved with them (a head)",
           &L::modules_to_save_spec);
    t.bind("bias", "which biases train beside the adapters: none, all, lora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "lora_only"});
    t.bind("rank_pattern", "ranks of their own: a JSON object from module-name expressions to r",
           &L::rank_pattern_spec);
    t.bind("alpha_pattern", "lora_alphas of their own: a JSON object from module-name expressions to lora_alpha",
           &L::alpha_pattern_spec);
    t.bind("layers_to_transform", "the layer numbers to adapt, separated by commas (default: all)",
           &L::layers_to_transform_spec);
    t.bind("layers_pattern", "expressions naming the layer lists layers_to_transform numbers, separated by commas",
           &L::layers_pattern_spec);
    t.bind("base_model_name_or_path", "written to adapter_config.json (PEFT's AutoPeftModel loads it)",
           &L::base_model_name_or_path);
    t.bind("revision", "the base model's revision, written to adapter_config.json", &L::revision);
    t.bind("task_type", "PEFT's task type (e.g. CAUSAL_LM), written to adapter_config.json", &L::task_type);
  });
  return table;
}

LoraConfig LoraConfig::from(const std::string& targets, const Options& options) {
  require(options.kind() == OptionsKind::Lora, "LoRA options must be of kind lora, got ",
          options_kind_name(options.kind()));
  LoraConfig config = lora_option_table().read(options);
  const std::string text = trimmed(targets);
  require(!text.empty(), "target_modules is empty: name the linear layers to adapt (e.g. \"q_proj,v_proj\")");
  read_module_names("target_modules", text, &config.target_names,
                    [&](const std::string& expression) { config.set_target_regex(expression); });
  const std::string excluded = trimmed(config.exclude_spec);
  if (!excluded.empty())
    read_module_names("exclude_modules", excluded, &config.exclude_names,
                      [&](const std::string& expression) { config.set_exclude_regex(expression); });
  const std::string saved = trimmed(config.modules_to_save_spec);
  require(is_utf8(saved), "modules_to_save '", printable_utf8(saved), "' is not valid UTF-8");
  if (!saved.empty()) {
    for (const auto& name : split_trimmed(saved, ',')) {
      require(!name.empty(), "modules_to_save '", saved, "' has an empty name");
      config.modules_to_save.push_back(name);
    }
    config.modules_to_save_given = true;
  }
  // PEFT's PeftModelFor{SequenceClassification,TokenClassification,QuestionAnswering} train their
  // task's head whole (and write these names into adapter_config.json).
  if (config.task_type == "SEQ_CLS" || config.task_type == "TOKEN_CLS")
    config.modules_to_save.insert(config.modules_to_save.end(), {"classifier", "score"});
  else if (config.task_type == "QUESTION_ANS")
    config.modules_to_save.push_back("qa_outputs");
  read_patterns(config.rank_pattern_spec, "rank_pattern", [&](const std::string& key, const nlohmann::ordered_json& v) {
    require(v.is_number_integer(), "rank_pattern's '", key, "' must be an integer rank");
    config.add_rank_pattern(key, v.get<int64_t>());
  });
  read_patterns(config.alpha_pattern_spec, "alpha_pattern",
                [&](const std::string& key, const nlohmann::ordered_json& v) {
                  require(v.is_number(), "alpha_pattern's '", key, "' must be a number");
                  config.add_alpha_pattern(key, v.get<double>());
                });
  const std::string layers = trimmed(config.layers_to_transform_spec);
  if (!layers.empty())
    for (const auto& number : split_trimmed(layers, ',')) {
      const auto layer = parse_integer(number);
      require(layer.has_value(), "layers_to_transform '", layers, "' must be layer numbers separated by commas");
      config.layers_to_transform.push_back(*layer);
    }
  const std::string layer_lists = trimmed(config.layers_pattern_spec);
  if (!layer_lists.empty()) config.set_layers_pattern(split_trimmed(layer_lists, ','));
  config.check_layer_settings(/*layers_to_transform_given=*/!config.layers_to_transform.empty());
  const std::pair<const char*, const std::string*> texts[] = {
      {"base_model_name_or_path", &config.base_model_name_or_path},
      {"revision", &config.revision},
      {"task_type", &config.task_type}};
  for (const auto& [key, value] : texts)
    require(is_utf8(*value), key, " '", printable_utf8(*value), "' is not valid UTF-8");
  return config;
}

namespace {

bool names_match(const std::vector<std::string>& names, const std::string& module) {
  for (const auto& name : names)
    if (module == name || ends_with(module, "." + name)) return true;
  return false;
}

}  // namespace

void LoraConfig::set_target_regex(const std::string& expression) {
  regex_matches = module_regex(expression, "target_modules");
  target_regex = expression;
}

void LoraConfig::set_exclude_regex(const std::string& expression) {
  exclude_matches = module_regex(expression, "exclude_modules");
  exclude_regex = expression;
}

namespace {

// PEFT's get_pattern_key: `key` matches a module named it or ending in "." and it.
std::function<bool(const std::string&)> pattern_key_matcher(const std::string& key, const char* setting) {
  require(!key.empty(), setting, " has an empty module-name expression");
  require(is_utf8(key), setting, " '", printable_utf8(key), "' is not valid UTF-8");
  return module_regex("(.*\\.)?(" + key + ")", setting);
}

template <typename T>
const T* pattern_value(const std::vector<LoraConfig::Pattern<T>>& patterns, const std::string& module) {
  for (const auto& pattern : patterns)
    if (pattern.matches(module)) return &pattern.value;
  return nullptr;
}

}  // namespace

void LoraConfig::add_rank_pattern(const std::string& key, int64_t rank) {
  require(rank >= 1 && rank <= kMaxLoraRank, "rank_pattern's '", key, "' must be a rank from 1 to ", kMaxLoraRank,
          ", got ", rank);
  rank_pattern.push_back({key, rank, pattern_key_matcher(key, "rank_pattern")});
}

void LoraConfig::add_alpha_pattern(const std::string& key, double value) {
  require(std::isfinite(value) && value >= 0 && value <= kMaxLoraAlpha, "alpha_pattern's '", key,
          "' must be a lora_alpha in [0, ", kMaxLoraAlpha, "], got ", value);
  alpha_pattern.push_back({key, value, pattern_key_matcher(key, "alpha_pattern")});
}

void LoraConfig::set_layers_pattern(std::vector<std::string> patterns) {
  layer_index_matchers.clear();
  for (const auto& pattern : patterns) {
    require(!pattern.empty(), "layers_pattern has an empty expression");
    require(is_utf8(pattern), "layers_pattern '", printable_utf8(pattern), "' is not valid UTF-8");
    // PEFT's re.match(rf".*?\.{pattern}\.(\d+)\.", name), matched here as a whole name.
    layer_index_matchers.push_back(module_regex_group("(?:.*?\\." + pattern + "\\.(\\d+)\\.).*", "layers_pattern"));
  }
  layers_pattern = std::move(patterns);
}

void LoraConfig::check_layer_settings(bool layers_to_transform_given) const {
  // PEFT's LoraConfig refuses these alike.
  require(target_regex.empty() || (!layers_to_transform_given && layers_pattern.empty()),
          "layers_to_transform and layers_pattern need target_modules as names, not a regular expression (",
          describe_targets(), ")");
  require(layers_pattern.empty() || layers_to_transform_given,
          "layers_pattern is set without layers_to_transform: name the layer numbers to adapt");
}

int64_t LoraConfig::rank_of(const std::string& module) const {
  const int64_t* value = pattern_value(rank_pattern, module);
  return value ? *value : r;
}

double LoraConfig::alpha_of(const std::string& module) const {
  const double* value = pattern_value(alpha_pattern, module);
  return value ? *value : alpha;
}

double LoraConfig::scaling_of(const std::string& module) const {
  const double rank = static_cast<double>(rank_of(module)), a = alpha_of(module);
  return use_rslora ? a / std::sqrt(rank) : a / rank;
}

std::optional<int64_t> LoraConfig::layer_index(const std::string& module) const {
  // Without layers_pattern, PEFT's re.match(r".*?\.[^.]*\.(\d+)\.", name): the first number that
  // follows a component after a dot and has a dot after it.
  std::optional<std::string> digits;
  if (layer_index_matchers.empty()) {
    const std::vector<std::string> parts = split_trimmed(module, '.');
    for (size_t k = 1; k + 2 < parts.size() && !digits; ++k)
      if (!parts[k + 1].empty() && parts[k + 1].find_first_not_of("0123456789") == std::string::npos)
        digits = parts[k + 1];
  } else {
    for (const auto& matcher : layer_index_matchers)
      if ((digits = matcher(module))) break;
  }
  if (!digits) return std::nullopt;
  return parse_integer(*digits);  // Python's int() has no bound; past int64's, no listed layer either
}

bool LoraConfig::targets(const std::string& module) const {
  // As PEFT's check_target_module_exists: an excluded module first, whatever the targets say, then
  // one inside a module to save (a name of the list as whole components of the module's name).
  if (exclude_matches ? exclude_matches(module) : names_match(exclude_names, module)) return false;
  const std::string dotted = "." + module + ".";
  for (const auto& saved : modules_to_save)
    if (dotted.find("." + saved + ".") != std::string::npos) return false;
  if (regex_matches) return regex_matches(module);
  // A module named exactly is adapted whatever its layer; one a name ends with, in the layers
  // layers_to_transform lists (PEFT's order of checks).
  if (std::find(target_names.begin(), target_names.end(), module) != target_names.end()) return true;
  if (!names_match(target_names, module)) return false;
  if (layers_to_transform.empty()) return true;
  const std::optional<int64_t> layer = layer_index(module);
  return layer &&
         std::find(layers_to_transform.begin(), layers_to_transform.end(), *layer) != layers_to_transform.end();
}

bool LoraConfig::saves(const std::string& name) const {
  for (const auto& module : enclosing_modules(name))
    for (const auto& saved : modules_to_save)
      if (ends_with(module, saved)) return true;
  return false;
}

bool LoraConfig::trains_whole(const std::string& name, bool in_adapted_layer) const {
  if (saves(name)) return true;
  const bool is_bias = name == "bias" || ends_with(name, ".bias");
  return is_bias && (bias == "all" || (bias == "lora_only" && in_adapted_layer));
}

std::string LoraConfig::describe_targets() const {
  auto describe = [](const std::string& regex, const std::vector<std::string>& names) {
    if (!regex.empty()) return "re:" + regex;
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
    return out;
  };
  const std::string excluded = describe(exclude_regex, exclude_names);
  return describe(target_regex, target_names) + (excluded.empty() ? "" : " except " + excluded);
}

size_t LoraAdapters::add(const LoraConfig& config, const std::vector<LinearSite>& sites,
                         const std::vector<std::string>& other_modules) {
  require(adapters_.empty(), "the model already has LoRA adapters (", config_.describe_targets(),
          "); merge them (acc_model_merge_lora) before adding others");
  for (const auto& module : other_modules)
    require(!config.targets(module), "target_modules '", config.describe_targets(), "' matches '", module,
            "', which is not a linear layer; LoRA adapts linear layers only");
  std::vector<const LinearSite*> chosen;
  for (const auto& site : sites)
    if (config.targets(site.module)) chosen.push_back(&site);
  std::string examples;
  for (size_t i = 0; i < sites.size() && i < 4; ++i) examples += (i ? ", " : "") + sites[i].module;
  require(!chosen.empty(), "target_modules '", config.describe_targets(), "' matches no linear layer (",
          sites.empty() ? std::string("the model has none") : "linear layers are e.g. " + examples, ")");
  // As PEFT's LoraConfig.
  require(!(config.lora_bias && config.use_dora), "lora_bias is not supported with use_dora (as in PEFT)");
  // The branch's bias has no place in a weight the forward reads itself.
  if (config.lora_bias)
    for (const LinearSite* site : chosen)
      if (!site->set_output_adapter)
        fail(Status::Unsupported, "lora_bias cannot apply to '", site->module,
             "': the forward reads its weight itself, ",
             "so it is adapted through its weight (W + B A * scaling), which leaves no place for lora_B's bias");
  if (config.dropout != 0)
    for (const LinearSite* site : chosen)
      if (!site->set_output_adapter)
        fail(Status::Unsupported, "lora_dropout ", config.dropout, " cannot apply to '", site->module,
             "': the layer is adapted through its weight (W + B A * scaling), which leaves no place for dropout on "
             "its input; use lora_dropout 0");

  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite* site : chosen) {
    const int64_t out = site->weight.size(0), in = site->weight.size(1), r = config.rank_of(site->module);
    // PEFT makes lora_A = nn.Linear(in, r) and lora_B = nn.Linear(r, out) (each drawing its default
    // initialisation) and then re-initialises them: the same draws keep the global stream in step.
    at::Tensor a = new_linear_weight(r, in);
    at::Tensor b = new_linear_weight(out, r);
    at::Tensor b_bias;
    if (config.lora_bias) {  // nn.Linear's bias initialisation, after its weight's
      const double bound = 1.0 / std::sqrt(static_cast<double>(r));
      b_bias = at::empty({out}, at::kFloat).uniform_(-bound, bound);
    }
    if (config.init == "true") {
      torch::nn::init::kaiming_uniform_(a, std::sqrt(5.0));
      b.zero_();
      if (b_bias.defined()) b_bias.zero_();
    } else if (config.init == "gaussian") {
      a.normal_(0.0, 1.0 / static_cast<double>(r));
      b.zero_();
      if (b_bias.defined()) b_bias.zero_();
    } else if (config.init == "eva") {
      b.zero_();  // PEFT's placeholder until EVA's data-driven A: a loaded adapter replaces both
    }
    // "false" keeps nn.Linear's initialisation; "orthogonal" comes only with a loaded adapter, which
    // replaces it.
    // PEFT moves the adapters to the layer's device and dtype, initialises DoRA's magnitude there,
    // and then (autocast_adapter_dtype) makes a half-precision layer's adapters float32 again: they
    // start rounded to the layer's precision.
    LoraAdapter adapter{*site, a.to(site->weight.options()), b.to(site->weight.options()), r,
                        config.scaling_of(site->module)};
    if (config.use_dora) adapter.magnitude = initial_magnitude(site->weight, adapter);
    if (b_bias.defined()) adapter.b_bias = b_bias.to(site->weight.options());
    const bool low = site->weight.scalar_type() == at::kHalf || site->weight.scalar_type() == at::kBFloat16;
    for (at::Tensor* t : {&adapter.a, &adapter.b, &adapter.magnitude, &adapter.b_bias})
      if (t->defined()) *t = (low ? t->to(at::kFloat) : *t).set_requires_grad(true);
    made.push_back(std::move(adapter));
  }
  config_ = config;
  adapters_ = std::move(made);
  for (const auto& adapter : adapters_)
    if (adapter.site.set_output_adapter) adapter.site.set_output_adapter(output_adapter(adapter));
  return adapters_.size();
}

OutputAdapter LoraAdapters::output_adapter(const LoraAdapter& adapter) const {
  // PEFT's Linear.forward: result + lora_B(lora_A(dropout(x))) * scaling, the input cast to the
  // adapters' dtype and the sum back to the layer's. The tensors are captured as handles: moves
  // (Model::to) and sharding's storage swaps keep them.
  const at::Tensor a = adapter.a, b = adapter.b, b_bias = adapter.b_bias;
  const double scaling = adapter.scaling, p = config_.dropout;
  if (adapter.magnitude.defined()) return dora_output_adapter(adapter, p);
  return [a, b, b_bias, scaling, p](const at::Tensor& input, const at::Tensor& output, bool training) {
    at::Tensor x = input.to(a.scalar_type());
    if (p > 0) x = at::dropout(x, p, training);
    return (output + at::linear(at::linear(x, a), b, b_bias) * scaling).to(output.scalar_type());
  };
}

NamedTensors LoraAdapters::named_parameters() const {
  NamedTensors out;
  for (size_t k = 0; k < adapters_.size(); ++k) append_parameters(k, &out);
  return out;
}

void LoraAdapters::append_parameters(size_t k, NamedTensors* out) const {
  const LoraAdapter& adapter = adapters_[k];
  out->emplace_back(adapter.site.module + ".lora_A.weight", adapter.a);
  out->emplace_back(adapter.site.module + ".lora_B.weight", adapter.b);
  if (adapter.b_bias.defined()) out->emplace_back(adapter.site.module + ".lora_B.bias", adapter.b_bias);
  if (adapter.magnitude.defined()) out->emplace_back(adapter.site.module + kMagnitudeSuffix, adapter.magnitude);
}

NamedTensors LoraAdapters::placed_among(NamedTensors own) const {
  if (adapters_.empty()) return own;
  // One pass over `own` (the model lists its parameters at every step's clipping and zeroing): the
  // last parameter each adapted layer holds itself (not a submodule's).
  std::unordered_map<std::string, size_t> adapter_of;
  for (size_t k = 0; k < adapters_.size(); ++k) adapter_of.emplace(adapters_[k].site.module, k);
  std::vector<size_t> last_own(adapters_.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    const size_t dot = own[i].first.rfind('.');
    if (dot == std::string::npos) continue;
    auto it = adapter_of.find(own[i].first.substr(0, dot));
    if (it != adapter_of.end()) last_own[it->second] = i;
  }
  std::vector<std::vector<size_t>> after(own.size());  // the adapters that follow own[i]
  std::vector<size_t> last;
  for (size_t k = 0; k < adapters_.size(); ++k) (last_own[k] < own.size() ? after[last_own[k]] : last).push_back(k);
  NamedTensors out;
  for (size_t i = 0; i < own.size(); ++i) {
    out.push_back(std::move(own[i]));
    for (size_t k : after[i]) append_parameters(k, &out);
  }
  for (size_t k : last) append_parameters(k, &out);
  return out;
}

at::Tensor adapted_weight(const at::Tensor& w, const LoraAdapter& adapter) {
  const at::Tensor delta = lora_delta(adapter.a, adapter.b, adapter.scaling);
  if (!adapter.magnitude.defined()) return (w + delta).to(w.scalar_type());
  // PEFT's DoRA merge: m / ||W + delta|| (detached) times W + delta, per output row.
  const at::Tensor sum = w + delta;
  const at::Tensor norm = at::linalg_vector_norm(sum, 2, {1}, false, c10::nullopt).to(sum.scalar_type()).detach();
  return ((adapter.magnitude / norm).view({-1, 1}) * sum).to(w.scalar_type());
}

LoraAdapters::Applied LoraAdapters::apply() const {
  std::vector<const LoraAdapter*> applied;
  for (const auto& adapter : adapters_) {
    if (adapter.site.set_output_adapter) continue;  // adapts its output itself
    const at::Tensor& w = adapter.site.weight;
    adapter.site.use_weight(adapted_weight(w, adapter));
    applied.push_back(&adapter);
  }
  return Applied(std::move(applied));
}

LoraAdapters::Applied::~Applied() {
  for (const LoraAdapter* adapter : applied_) adapter->site.use_weight(adapter->site.weight);
}

void LoraAdapters::require_mergeable(const char* action) const {
  for (const auto& adapter : adapters_)
    if (!adapter.site.tied_to.empty())
      fail(Status::Unsupported, action, ": LoRA adapts '", adapter.site.module, "', whose weight is tied to '",
           adapter.site.tied_to, "': merged weights would change both layers or untie them; save the adapters ",
           "(acc_model_save_lora) with the base weights as they are, or leave the tied layer out of target_modules");
  for (const auto& adapter : adapters_)
    if (adapter.b_bias.defined() && !adapter.site.bias.defined())
      fail(Status::Unsupported, action, ": lora_bias adapts '", adapter.site.module, "', which has no bias to merge ",
           "lora_B's into (as PEFT refuses it); save the adapters (acc_model_save_lora)");
}

NamedTensors LoraAdapters::merged(const NamedTensors& state) const {
  if (adapters_.empty()) return state;
  require_mergeable("save_model");
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& entry : state) by_name.emplace(entry.first, &entry.second);
  auto entry_of = [&](const std::string& name) -> const at::Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail(Status::Internal, "the state dict lacks the LoRA entry '", name, "'");
    return *it->second;
  };
  std::unordered_map<std::string, at::Tensor> merged_weights;
  std::unordered_set<std::string> adapter_entries;
  for (const auto& adapter : adapters_) {
    const std::string& module = adapter.site.module;
    const at::Tensor& w = entry_of(module + ".weight");
    at::NoGradGuard no_grad;
    LoraAdapter stated = adapter;  // with the state's tensors
    stated.a = entry_of(module + ".lora_A.weight");
    stated.b = entry_of(module + ".lora_B.weight");
    if (adapter.magnitude.defined()) stated.magnitude = entry_of(module + kMagnitudeSuffix);
    merged_weights[module + ".weight"] = adapted_weight(w, stated);
    if (adapter.b_bias.defined())
      merged_weights[module + ".bias"] =
          adapted_bias(entry_of(module + ".bias"), entry_of(module + ".lora_B.bias"), adapter.scaling);
    adapter_entries.insert(
        {module + ".lora_A.weight", module + ".lora_B.weight", module + ".lora_B.bias", module + kMagnitudeSuffix});
  }
  NamedTensors out;
  for (const auto& entry : state) {
    if (adapter_entries.count(entry.first)) continue;
    auto it = merged_weights.find(entry.first);
    out.emplace_back(entry.first, it == merged_weights.end() ? entry.second : it->second);
  }
  return out;
}

void LoraAdapters::merge_into_weights() const {
  require_mergeable("merging LoRA adapters");
  at::NoGradGuard no_grad;
  for (const auto& adapter : adapters_) {
    adapter.site.weight.copy_(adapted_weight(adapter.site.weight, adapter));
    if (adapter.b_bias.defined())
      adapter.site.bias.copy_(adapted_bias(adapter.site.bias, adapter.b_bias, adapter.scaling));
  }
}

void LoraAdapters::merge_and_remove() {
  merge_into_weights();
  for (const auto& adapter : adapters_)
    if (adapter.site.set_output_adapter) adapter.site.set_output_adapter(nullptr);
  adapters_.clear();
}

}  // namespace acc

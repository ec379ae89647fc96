#include "model/lora.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/module_regex.h"
#include "common/text.h"
#include "common/utf8.h"

namespace acc {
namespace {

// nn.Linear(in, out, bias=False)'s own initialisation, which PEFT's adapters go through first.
at::Tensor new_linear_weight(int64_t out, int64_t in) {
  at::Tensor w = at::empty({out, in}, at::kFloat);
  torch::nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  return w;
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

}  // namespace

const OptionTable<LoraConfig>& lora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Lora, [](OptionTable<L>& t) {
    t.bind("r", "the adapters' rank", &L::r).at_least(1).at_most(1 << 20);
    // At most float's largest: the scaling multiplies float32 outputs (an inf would make 0 * inf NaNs).
    t.bind("lora_alpha", "the scaling is lora_alpha / r", &L::alpha).at_least(0).at_most(kMaxLoraAlpha);
    t.bind("lora_dropout", "dropout on the adapted layer's input", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("use_rslora", "scale by lora_alpha / sqrt(r)", &L::use_rslora);
    t.bind("init_lora_weights", "Kaiming A and zero B (true), N(0, 1/r) A (gaussian), or nn.Linear's", &L::init)
        .one_of({"true", "gaussian", "false"});
    t.bind("exclude_modules", "modules left unadapted, named as target_modules are", &L::exclude_spec);
    t.bind("modules_to_save", "modules trained whole beside the adapters and saved with them (a head)",
           &L::modules_to_save_spec);
    t.bind("bias", "which biases train beside the adapters: none, all, lora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "lora_only"});
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

double LoraConfig::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

bool LoraConfig::targets(const std::string& module) const {
  // As PEFT's check_target_module_exists: an excluded module first, whatever the targets say, then
  // one inside a module to save (a name of the list as whole components of the module's name).
  if (exclude_matches ? exclude_matches(module) : names_match(exclude_names, module)) return false;
  const std::string dotted = "." + module + ".";
  for (const auto& saved : modules_to_save)
    if (dotted.find("." + saved + ".") != std::string::npos) return false;
  return regex_matches ? regex_matches(module) : names_match(target_names, module);
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
  if (config.dropout != 0)
    for (const LinearSite* site : chosen)
      if (!site->set_output_adapter)
        fail(Status::Unsupported, "lora_dropout ", config.dropout, " cannot apply to '", site->module,
             "': the layer is adapted through its weight (W + B A * scaling), which leaves no place for dropout on "
             "its input; use lora_dropout 0");

  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite* site : chosen) {
    const int64_t out = site->weight.size(0), in = site->weight.size(1);
    // PEFT makes lora_A = nn.Linear(in, r) and lora_B = nn.Linear(r, out) (each drawing its default
    // initialisation) and then re-initialises them: the same draws keep the global stream in step.
    at::Tensor a = new_linear_weight(config.r, in);
    at::Tensor b = new_linear_weight(out, config.r);
    if (config.init == "true") {
      torch::nn::init::kaiming_uniform_(a, std::sqrt(5.0));
      b.zero_();
    } else if (config.init == "gaussian") {
      a.normal_(0.0, 1.0 / static_cast<double>(config.r));
      b.zero_();
    } else if (config.init == "eva") {
      b.zero_();  // PEFT's placeholder until EVA's data-driven A: a loaded adapter replaces both
    }
    // "false" keeps nn.Linear's initialisation; "orthogonal" comes only with a loaded adapter, which
    // replaces it.
    // Adapters of a half-precision layer stay float32 (PEFT's autocast_adapter_dtype).
    const bool low = site->weight.scalar_type() == at::kHalf || site->weight.scalar_type() == at::kBFloat16;
    const auto options = site->weight.options().dtype(low ? at::kFloat : site->weight.scalar_type());
    made.push_back({*site, a.to(options).set_requires_grad(true), b.to(options).set_requires_grad(true)});
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
  const at::Tensor a = adapter.a, b = adapter.b;
  const double scaling = config_.scaling(), p = config_.dropout;
  return [a, b, scaling, p](const at::Tensor& input, const at::Tensor& output, bool training) {
    at::Tensor x = input.to(a.scalar_type());
    if (p > 0) x = at::dropout(x, p, training);
    return (output + at::linear(at::linear(x, a), b) * scaling).to(output.scalar_type());
  };
}

NamedTensors LoraAdapters::named_parameters() const {
  NamedTensors out;
  for (const auto& adapter : adapters_) {
    out.emplace_back(adapter.site.module + ".lora_A.weight", adapter.a);
    out.emplace_back(adapter.site.module + ".lora_B.weight", adapter.b);
  }
  return out;
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
  auto add = [&](size_t k) {
    out.emplace_back(adapters_[k].site.module + ".lora_A.weight", adapters_[k].a);
    out.emplace_back(adapters_[k].site.module + ".lora_B.weight", adapters_[k].b);
  };
  for (size_t i = 0; i < own.size(); ++i) {
    out.push_back(std::move(own[i]));
    for (size_t k : after[i]) add(k);
  }
  for (size_t k : last) add(k);
  return out;
}

namespace {

// The weight delta (B A) * scaling, as PEFT's get_delta_weight computes it.
at::Tensor lora_delta(const at::Tensor& a, const at::Tensor& b, double scaling) { return at::matmul(b, a) * scaling; }

}  // namespace

at::Tensor adapted_weight(const at::Tensor& w, const at::Tensor& a, const at::Tensor& b, double scaling) {
  return (w + lora_delta(a, b, scaling)).to(w.scalar_type());
}

LoraAdapters::Applied LoraAdapters::apply() const {
  std::vector<const LoraAdapter*> applied;
  for (const auto& adapter : adapters_) {
    if (adapter.site.set_output_adapter) continue;  // adapts its output itself
    const at::Tensor& w = adapter.site.weight;
    adapter.site.use_weight(adapted_weight(w, adapter.a, adapter.b, config_.scaling()));
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
    merged_weights[module + ".weight"] = adapted_weight(w, entry_of(module + ".lora_A.weight"),
                                                        entry_of(module + ".lora_B.weight"), config_.scaling());
    adapter_entries.insert({module + ".lora_A.weight", module + ".lora_B.weight"});
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
  for (const auto& adapter : adapters_) adapter.site.weight.add_(lora_delta(adapter.a, adapter.b, config_.scaling()));
}

void LoraAdapters::merge_and_remove() {
  merge_into_weights();
  for (const auto& adapter : adapters_)
    if (adapter.site.set_output_adapter) adapter.site.set_output_adapter(nullptr);
  adapters_.clear();
}

}  // namespace acc

#include "model/peft/trainable_tokens.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/text.h"

namespace acc {
namespace {

// The site a key names as PEFT's _set_trainable finds it: every module whose name ends with the key
// (no dot needed). The list form ("") is for the input embedding: the first embedding layer.
const TokenSite& site_named(const std::string& key, const std::vector<TokenSite>& sites) {
  if (key.empty()) {
    for (const auto& site : sites)
      if (site.is_embedding) return site;
    fail(Status::InvalidArgument, "trainable_token_indices is a list, for the model's input embedding, but the model ",
         "has no embedding layer");
  }
  std::vector<const TokenSite*> found;
  for (const auto& site : sites)
    if (ends_with(site.module, key)) found.push_back(&site);
  require(!found.empty(), "trainable_token_indices names '", key,
          "', which matches no embedding or linear layer of the model");
  // (not require: its message would read found[1] whether or not there is one)
  if (found.size() > 1)
    fail(Status::InvalidArgument, "trainable_token_indices names '", key, "', which matches both '", found[0]->module,
         "' and '", found[1]->module, "': give a longer name");
  return *found.front();
}

// The adapter of `site`'s rows `list` (`setting` names the option in messages), delta copied from
// the rows, the other sites holding its weight tied to it; checks the layer and the indices.
TokenAdapter make_adapter(const TokenSite& site, const std::vector<int64_t>& list, const std::vector<TokenSite>& sites,
                          const char* setting) {
  const std::string& module = site.module;
  // PEFT computes such a layer as F.linear(x, W): without its bias.
  if (site.has_bias)
    fail(Status::Unsupported, setting, " names '", module,
         "', a linear layer with a bias: PEFT computes it without its bias; name its embedding instead");
  require(!list.empty(), setting, " for '", module, "' is an empty list");
  const int64_t rows = site.weight.size(0);
  std::set<int64_t> seen;
  for (int64_t index : list) {
    require(index >= 0 && index < rows, setting, " for '", module, "' holds ", index, ", outside the layer's ", rows,
            " tokens");
    require(seen.insert(index).second, setting, " for '", module, "' holds ", index,
            " twice (the rows would be written in no defined order)");
  }
  TokenAdapter adapter;
  adapter.site = site;
  for (const auto& other : sites)
    if (other.module != module && other.weight.unsafeGetTensorImpl() == site.weight.unsafeGetTensorImpl())
      adapter.tied.push_back(other);
  adapter.indices = list;
  at::NoGradGuard no_grad;
  adapter.index = at::tensor(list, at::TensorOptions().dtype(at::kLong)).to(site.weight.device());
  // PEFT's update_layer: the rows' values, in the weight's dtype and on its device.
  adapter.delta = site.weight.index_select(0, adapter.index).detach().clone().set_requires_grad(true);
  return adapter;
}

}  // namespace

std::vector<TokenAdapter> TrainableTokens::make(const TokenIndices& indices, const std::vector<TokenSite>& sites,
                                                const std::vector<std::string>& lora_modules) {
  std::vector<TokenAdapter> made;
  std::unordered_set<const c10::TensorImpl*> weights_taken;
  for (const auto& [key, list] : indices) {
    const TokenSite& site = site_named(key, sites);
    // PEFT's tied adapter is the same weight computed with the same rows: one list per weight.
    require(weights_taken.insert(site.weight.unsafeGetTensorImpl()).second, "trainable_token_indices names '",
            site.module, "', whose weight another of its entries already trains (tied layers share one list)");
    TokenAdapter adapter = make_adapter(site, list, sites, "trainable_token_indices");
    auto require_not_adapted = [&](const TokenSite& layer) {
      require(std::find(lora_modules.begin(), lora_modules.end(), layer.module) == lora_modules.end(), "'",
              layer.module, "' is both adapted by LoRA and trained by trainable_token_indices: do one or the other");
    };
    require_not_adapted(adapter.site);
    for (const auto& tied : adapter.tied) require_not_adapted(tied);
    made.push_back(std::move(adapter));
  }
  return made;
}

std::vector<TokenAdapter> TrainableTokens::make_standalone(const LoraConfig& config,
                                                           const std::vector<TokenSite>& sites,
                                                           const std::vector<std::string>& other_modules) {
  std::vector<const TokenSite*> chosen;
  if (config.target_names.empty() && config.target_regex.empty()) {
    chosen.push_back(&site_named("", sites));  // PEFT's default: the model's input embedding
  } else {
    auto is_site = [&](const std::string& module) {
      return std::any_of(sites.begin(), sites.end(), [&](const TokenSite& site) { return site.module == module; });
    };
    for (const auto& module : other_modules)
      require(is_site(module) || !config.targets(module), "target_modules '", config.describe_targets(), "' matches '",
              module, "', which is neither an embedding nor a linear layer");
    for (const auto& site : sites)
      if (config.targets(site.module)) chosen.push_back(&site);
    require(!chosen.empty(), "target_modules '", config.describe_targets(),
            "' matches no embedding or linear layer of the model");
  }
  auto is_chosen = [&](const TokenSite& site) {
    return std::any_of(chosen.begin(), chosen.end(), [&](const TokenSite* c) { return c->module == site.module; });
  };
  std::vector<TokenAdapter> made;
  for (const TokenSite* site : chosen) {
    const c10::TensorImpl* weight = site->weight.unsafeGetTensorImpl();
    // A head tied to a chosen embedding is that embedding's tied adapter (PEFT ties it so).
    if (std::any_of(made.begin(), made.end(),
                    [&](const TokenAdapter& a) { return a.site.weight.unsafeGetTensorImpl() == weight; }))
      continue;
    // PEFT's layer on a head alone would leave the embedding sharing its weight computing with the
    // old rows; here a weight's rows are the same wherever it is used.
    for (const auto& other : sites)
      if (other.is_embedding && other.weight.unsafeGetTensorImpl() == weight && !is_chosen(other))
        fail(Status::Unsupported, "target_modules '", config.describe_targets(), "' matches '", site->module,
             "', whose weight is tied to the embedding '", other.module, "': target '", other.module,
             "' (its tied layers compute with the same rows)");
    made.push_back(make_adapter(*site, config.standalone_indices, sites, "token_indices"));
  }
  return made;
}

void TrainableTokens::append_parameters(size_t k, NamedTensors* out) const {
  out->emplace_back(adapters_[k].site.module + suffix(), adapters_[k].delta);
}

at::Tensor TrainableTokens::replaced(const at::Tensor& weight, const TokenAdapter& adapter, const at::Tensor& delta) {
  // The model may have moved since the indices were made (acc_model_to): they follow the weight.
  return weight.index_copy(0, adapter.index.to(weight.device()), delta.to(weight.scalar_type()));
}

TrainableTokens::Applied TrainableTokens::apply() const {
  std::vector<const TokenAdapter*> applied;
  for (const auto& adapter : adapters_) {
    const at::Tensor w = replaced(adapter.site.weight, adapter, adapter.delta);
    adapter.site.use_weight(w);
    for (const auto& tied : adapter.tied) tied.use_weight(w);
    applied.push_back(&adapter);
  }
  return Applied(std::move(applied));
}

TrainableTokens::Applied::~Applied() {
  for (const TokenAdapter* adapter : applied_) {
    adapter->site.use_weight(adapter->site.weight);
    for (const auto& tied : adapter->tied) tied.use_weight(tied.weight);
  }
}

NamedTensors TrainableTokens::merged(const NamedTensors& state) const {
  if (adapters_.empty()) return state;
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& entry : state) by_name.emplace(entry.first, &entry.second);
  auto entry_of = [&](const std::string& name) -> const at::Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail(Status::Internal, "the state dict lacks the trainable tokens' entry '", name, "'");
    return *it->second;
  };
  std::unordered_map<std::string, at::Tensor> merged_weights;
  std::unordered_set<std::string> deltas;
  at::NoGradGuard no_grad;
  for (const auto& adapter : adapters_) {
    const std::string weight = adapter.site.module + ".weight", delta = adapter.site.module + suffix();
    merged_weights[weight] = replaced(entry_of(weight), adapter, entry_of(delta));
    // A tied layer listed under its own name too (named_parameters_with_ties) holds the same weight.
    for (const auto& tied : adapter.tied)
      if (by_name.count(tied.module + ".weight")) merged_weights[tied.module + ".weight"] = merged_weights[weight];
    deltas.insert(delta);
  }
  NamedTensors out;
  for (const auto& entry : state) {
    if (deltas.count(entry.first)) continue;
    auto it = merged_weights.find(entry.first);
    out.emplace_back(entry.first, it == merged_weights.end() ? entry.second : it->second);
  }
  return out;
}

void TrainableTokens::merge_into_weights() const {
  at::NoGradGuard no_grad;
  for (const auto& adapter : adapters_)
    adapter.site.weight.index_copy_(0, adapter.index.to(adapter.site.weight.device()),
                                    adapter.delta.to(adapter.site.weight.scalar_type()));
}

}  // namespace acc

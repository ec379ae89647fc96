// PEFT's several named adapters on one model (add_adapter, load_adapter, set_adapter,
// delete_adapter, unload). The active adapters are the model's lora_, as a model with one adapter
// has them; the others are LoraAdapters kept whole but uninstalled. Switching between adapters of
// the same layers exchanges their tensors in place (LoraAdapters::exchange); otherwise it takes the
// active ones off their layers and wires the model up again for the incoming ones by add_lora of
// their configuration (a TorchScript model's marked forward depends on the layers adapted), with the
// global random stream restored afterwards, then hands them their own tensors (LoraAdapters::adopt).
// Either way the tensors keep their identity: an adapter switched away and back is the same
// parameters.
#include <algorithm>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/random.h"
#include "model/model.h"
#include "model/peft/factor_methods.h"
#include "model/peft/lora_files.h"
#include "model/peft/lora_init.h"
#include "model/peft/mixed_batch.h"
#include "model/peft/weighted_adapter.h"

namespace acc {

namespace {

// What the adapters kept aside cannot share: the model's biases trained in place. PEFT allows one
// adapter per model to train them, all adapters computing with the one set of biases, which trains
// or not by what the active adapter was when adapters were last added; that is not built. (Modules
// to save are copied per adapter, put_saved_modules_aside; trainable tokens are deltas of each
// adapter's own; an initialisation that rewrites the base weights, OLoRA or PiSSA, rewrites them
// under every adapter, as in PEFT.)
void require_keepable_aside(const LoraConfig& config, const std::string& name) {
  if (config.bias != "none")
    fail(Status::Unsupported, "several named adapters on one model where the adapter '", name, "' has bias \"",
         config.peft_bias(),
         "\", training the model's own biases, are not built (PEFT allows one such adapter per model, the "
         "biases shared by every adapter); set bias \"none\" for all, or merge or unload the others first");
}

void require_adapter_name(const std::string& name) {
  require(!name.empty() && name != "." && name != ".." && name.find_first_of("/\\") == std::string::npos,
          "adapter name '", name, "' is not a name a folder can have (acc_model_save_lora writes each adapter but ",
          "\"default\" into a folder of its name)");
  for (const char* file : kAdapterFileNames)
    require(name.rfind(file, 0) != 0, "adapter name '", name, "' would name a folder in place of (or beside) PEFT's ",
            file, " in the folder acc_model_save_lora writes");
  require(name.rfind(kAdapterSaveLockFile, 0) != 0, "adapter name '", name,
          "' would name a folder in place of (or beside) the lock file acc_model_save_lora takes in its folder");
  require(name.find('.') == std::string::npos, "adapter name '", name,
          "' holds a '.': PEFT keeps a layer's adapters in torch ModuleDicts, which refuse such a name");
  // (PEFT takes it, and its mixed batches then run that adapter's rows through the base model)
  require(name != kBaseAdapterName, "adapter name '", name,
          "' is what a mixed batch's adapter_names calls the base model: the adapter could not be chosen");
}

}  // namespace

std::vector<std::string> Model::adapter_names() const {
  std::vector<std::string> names = adapter_order_;
  if (!lora_.empty() && std::find(names.begin(), names.end(), active_adapter_) == names.end())
    names.insert(names.begin(), active_adapter_);  // made by add_lora or load_lora
  return names;
}

LoraAdapters Model::take_active_adapters() {
  LoraAdapters taken = std::move(lora_);
  lora_ = LoraAdapters();
  taken.uninstall();
  forget_adapted_layers();
  return taken;
}

LoraAdapters Model::set_active_aside() {
  LoraAdapters taken = take_active_adapters();
  taken.put_saved_modules_aside();
  return taken;
}

void Model::reinstate(LoraAdapters& kept, bool enabled) {
  LoraConfig wiring = kept.config();
  wiring.init = "false";  // nn.Linear's draws alone: nothing computed from the weights
  {
    RandomStreamRestorer restore;
    add_lora(wiring);
  }
  try {
    lora_.adopt(std::move(kept), enabled);
  } catch (...) {
    take_active_adapters();
    throw;
  }
}

size_t Model::make_named(const std::string& name, const LoraConfig& config, const std::function<size_t()>& make) {
  require_adapter_name(name);
  for (const auto& existing : adapter_names())
    require(existing != name, "the model already has an adapter named '", name, "'");
  if (lora_.empty()) {  // PEFT's get_peft_model(model, config, adapter_name): the first is active
    const size_t made = make();
    active_adapter_ = name;
    adapter_order_ = {name};
    return made;
  }
  require_keepable_aside(lora_.config(), active_adapter_);
  require_keepable_aside(config, name);
  // Placeholder weights cannot be decomposed beside adapters that are there already.
  if (decomposes_weight(config.init))
    require_weights(("a named adapter with init_lora_weights " + config.init).c_str());
  if (config.peft_type == PeftType::LnTuning || lora_.config().peft_type == PeftType::LnTuning)
    fail(Status::Unsupported, "adapter '", name,
         "': several named adapters beside LN tuning are not built (merge or unload the other first)");
  require(config.peft_type == lora_.config().peft_type, "adapter '", name, "' is ", peft_type_name(config.peft_type),
          " beside ", peft_type_name(lora_.config().peft_type),
          " adapters: PEFT holds adapters of one method per model");
  if (shared_tensors(config.peft_type)) {  // PEFT's VeRA and RandLoRA: one key, saved or not alike
    const LoraConfig& have = lora_.config();
    const char* method = peft_method_name(config.peft_type);
    require(config.projection_prng_key == have.projection_prng_key, "adapter '", name, "' has projection_prng_key ",
            config.projection_prng_key, ", the model's ", method, " adapters ", have.projection_prng_key, ": PEFT's ",
            method, " takes one key for every adapter (its ValueError)");
    require(config.save_projection == have.save_projection, "adapter '", name, "' has save_projection ",
            config.save_projection ? "true" : "false", ", the model's ", method, " adapters ",
            have.save_projection ? "true" : "false", ": PEFT's ", method,
            " saves the projections of every adapter or of none (its ValueError)");
  }
  require_trainable_set_free(/*freezing=*/false);
  // The originals kept for the modules to save would be placeholders.
  if (!lora_.saved_module_names().empty()) require_weights("several named adapters beside modules_to_save");
  const bool enabled = lora_.enabled();
  RandomStreamRestorer restore_on_failure;
  const BaseFlags flags = base_flags();  // a refusal leaves them as they were
  LoraAdapters active = set_active_aside();
  size_t made_count = 0;
  LoraAdapters made;
  try {
    made_count = make();
    made = set_active_aside();
  } catch (...) {
    set_active_aside();  // the modules a load wrote into are the originals again
    reinstate(active, enabled);
    restore_base_flags(flags);
    throw;
  }
  reinstate(active, enabled);  // draws nothing: the new adapter's draws stay taken, as PEFT's
  restore_on_failure.keep();
  made.set_trainable(false);  // PEFT's new adapters are inactive, frozen
  adapter_order_ = adapter_names();
  adapter_order_.push_back(name);
  inactive_.emplace(name, std::move(made));
  return made_count;
}

size_t Model::add_named_lora(const std::string& name, const LoraConfig& config) {
  return make_named(name, config, [&] { return add_lora(config); });
}

void Model::load_named_lora(const std::string& dir, const std::string& name) {
  LoraFiles files = read_lora_files(dir);
  const LoraConfig config = files.config;
  make_named(name, config, [&] {
    load_lora_files(std::move(files), "'" + dir + "'");
    return lora_.size();
  });
}

void Model::set_adapter(const std::string& name) {
  require(!lora_.empty(), "set_adapter: the model has no adapters");
  if (name == active_adapter_) {  // PEFT marks it trainable again
    require_trainable_set_free(/*freezing=*/false);
    return lora_.set_trainable(true);
  }
  const auto it = inactive_.find(name);
  if (it == inactive_.end()) {
    std::string have;
    for (const auto& n : adapter_names()) have += (have.empty() ? "'" : ", '") + n + "'";
    fail(Status::InvalidArgument, "set_adapter: the model has no adapter named '", name, "' (it has ", have, ")");
  }
  require_trainable_set_free(/*freezing=*/false);
  const bool enabled = lora_.enabled();
  // PEFT's set_adapter touches the adapters alone: the base parameters keep the flags the user gave
  // them (wiring the incoming adapter's layers anew freezes them first).
  const BaseFlags flags = base_flags();
  LoraAdapters outgoing;
  if (lora_.exchange(it->second, enabled)) {  // the same layers wired alike: the tensors change places alone
    outgoing = std::move(it->second);
  } else {
    outgoing = set_active_aside();
    try {
      reinstate(it->second, enabled);
    } catch (...) {
      reinstate(outgoing, enabled);
      restore_base_flags(flags);
      throw;
    }
    restore_base_flags(flags);
  }
  inactive_.erase(it);
  outgoing.set_trainable(false);
  lora_.set_trainable(true);
  inactive_.emplace(active_adapter_, std::move(outgoing));
  active_adapter_ = name;
}

void Model::delete_adapter(const std::string& name) {
  const auto names = adapter_names();
  require(std::find(names.begin(), names.end(), name) != names.end(),
          "delete_adapter: the model has no adapter named '", name, "'");
  require_trainable_set_free(/*freezing=*/false);
  if (name == active_adapter_) {
    if (inactive_.empty()) return remove_adapters(/*every_original=*/true);
    const std::string next = inactive_.begin()->first;  // PEFT's choice: the first of the others by name
    set_adapter(next);
  }
  drop_kept_aside(name);
}

void Model::drop_kept_aside(const std::string& name) {
  inactive_.erase(name);
  adapter_order_.erase(std::remove(adapter_order_.begin(), adapter_order_.end(), name), adapter_order_.end());
}

void Model::unload_lora() { remove_adapters(/*every_original=*/false); }

void Model::remove_adapters(bool every_original) {
  const char* what = every_original ? "delete_adapter" : "unload";
  require(!lora_.empty(), what, ": the model has no LoRA adapters or trainable tokens");
  // As merging: after training too (an optimizer or acc_prepare holding the parameters), the
  // prepared model refusing to go on (merges()).
  require_merging_free();
  // The modules PEFT trained copies of go back to their originals, frozen as its originals are (an
  // optimizer made for the training then leaves them alone): LN tuning's on unload (its
  // base_layer), and the modules to save too where the last adapter is deleted (its
  // ModulesToSaveWrapper, with no adapter left, computes with original_module).
  std::vector<at::Tensor> restored;
  const bool ln_tuning = lora_.config().peft_type == PeftType::LnTuning;
  if ((ln_tuning || every_original) && !lora_.saved_module_names().empty()) {
    if (!lora_.keeps_originals()) fail(Status::Unsupported, what, ": ", lora_.originals_dropped_because());
    restored = lora_.restore_originals(every_original);
  }
  ++merges_;
  take_active_adapters();
  forget_named_adapters();
  for (at::Tensor& tensor : restored)
    if (tensor.is_leaf()) tensor.set_requires_grad(false);  // (buffers too: never trained)
}

namespace {

// PEFT's target_modules of a combination: the names of all (a union, in the order they come), or
// their expressions joined ("(a)|(b)"); a mix of the two forms is refused, as PEFT refuses it.
void combine_targets(const std::vector<const LoraAdapters*>& sources, LoraConfig* combined) {
  const bool expressions = !sources.front()->config().target_regex.empty();
  std::vector<std::string> names;
  std::string regex;
  for (const LoraAdapters* source : sources) {
    const LoraConfig& config = source->config();
    require(!config.target_regex.empty() == expressions, "add_weighted_adapter: the adapters' target_modules are ",
            "names in some and a regular expression in others (PEFT refuses the mix too)");
    for (const auto& name : config.target_names)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    regex += (regex.empty() ? "(" : "|(") + config.target_regex + ")";
  }
  if (expressions) {
    combined->target_names.clear();
    combined->set_target_regex(regex);
  } else {
    combined->target_names = names;
  }
}

// PEFT's IA3 _check_add_weighted_adapter: the feedforward modules of all, names joined or
// expressions joined "(a)|(b)", never a mix.
void combine_feedforward(const std::vector<const LoraAdapters*>& sources, LoraConfig* combined) {
  const bool expressions = !sources.front()->config().feedforward_regex.empty();
  std::vector<std::string> names;
  std::string regex;
  for (const LoraAdapters* source : sources) {
    const LoraConfig& config = source->config();
    require(!config.feedforward_regex.empty() == expressions, "add_weighted_adapter: the adapters' ",
            "feedforward_modules are names in some and a regular expression in others (PEFT refuses the mix too)");
    for (const auto& name : config.feedforward_names)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    regex += (regex.empty() ? "(" : "|(") + config.feedforward_regex + ")";
  }
  combined->feedforward_names.clear();
  combined->feedforward_regex.clear();
  combined->feedforward_matches = nullptr;
  if (expressions)
    combined->set_feedforward_regex(regex);
  else
    combined->feedforward_names = names;
}

// The largest rank an adapter's configuration gives (PEFT's max(r, *rank_pattern.values())).
int64_t largest_rank(const LoraConfig& config) {
  int64_t r = config.r;
  for (const auto& pattern : config.rank_pattern) r = std::max(r, pattern.value);
  return r;
}

}  // namespace

size_t Model::add_weighted_adapter(const std::vector<std::string>& adapters, const std::vector<double>& weights,
                                   const std::string& name, const WeightedCombination& how) {
  require(!adapters.empty(), "add_weighted_adapter needs at least one adapter to combine");
  require(adapters.size() == weights.size(), "add_weighted_adapter: ", adapters.size(), " adapters and ",
          weights.size(), " weights");
  std::vector<const LoraAdapters*> sources;
  for (size_t i = 0; i < adapters.size(); ++i) {
    const std::string& adapter = adapters[i];
    require(std::isfinite(weights[i]), "add_weighted_adapter: the weight of '", adapter, "' is ", weights[i]);
    if (!lora_.empty() && adapter == active_adapter_) {
      sources.push_back(&lora_);
    } else {
      const auto it = inactive_.find(adapter);
      require(it != inactive_.end(), "add_weighted_adapter: the model has no adapter named '", adapter, "'");
      sources.push_back(&it->second);
    }
  }
  // PEFT's refusal: a module two of them save has no one copy to combine.
  std::set<std::string> saved;
  for (const LoraAdapters* source : sources)
    for (const auto& tensor : source->saved_module_names())
      require(saved.insert(tensor).second, "add_weighted_adapter: more than one of the adapters saves '", tensor,
              "' (modules_to_save), whose copies cannot be combined (PEFT refuses it too)");
  if (sources.front()->config().peft_type == PeftType::Ia3) return add_weighted_ia3(sources, weights, name, how);
  require(sources.front()->config().peft_type == PeftType::Lora,
          "add_weighted_adapter combines LoRA or IA3 adapters (PEFT's ",
          peft_method_name(sources.front()->config().peft_type), " has no add_weighted_adapter)");
  // The combination assumes LoRA's B A * lora_alpha / r, scaled 1 in the result: DoRA's magnitudes,
  // lora_B's bias and rsLoRA's scaling have no place in it (PEFT combines them all the same, giving
  // another adapter back: huggingface/peft#3761).
  for (const LoraAdapters* source : sources)
    for (const auto& [set, what] :
         {std::pair{source->config().use_dora, "use_dora"}, std::pair{source->config().lora_bias, "lora_bias"},
          std::pair{source->config().use_rslora, "use_rslora"}})
      if (set)
        fail(Status::Unsupported, "add_weighted_adapter: an adapter with ", what,
             " cannot be combined as LoRA's B A (the result would compute otherwise even for one adapter ",
             "of weight 1; PEFT's does so silently)");
  std::vector<int64_t> ranks;
  for (const LoraAdapters* source : sources) ranks.push_back(largest_rank(source->config()));
  const int64_t rank = combined_rank(how, ranks);
  for (const LoraAdapters* source : sources)
    for (const auto& adapter : source->adapters()) check_combinable(adapter, how, rank);
  LoraConfig combined = sources.front()->config();
  combine_targets(sources, &combined);
  combined.r = rank;
  combined.alpha = static_cast<double>(rank);
  combined.rank_pattern.clear();
  combined.alpha_pattern.clear();
  combined.rank_pattern_spec.clear();
  combined.alpha_pattern_spec.clear();
  RandomStreamRestorer restore_on_failure;
  const size_t added = add_named_lora(name, combined);  // PEFT's inject_adapter: drawn, then frozen aside
  try {
    for (const auto& target : inactive_.at(name).adapters()) {
      std::vector<WeightedSource> layer;
      for (size_t i = 0; i < sources.size(); ++i)
        for (const auto& adapter : sources[i]->adapters())
          if (adapter.site.module == target.site.module) layer.push_back({&adapter, weights[i]});
      combine_into(target, layer, how);
    }
  } catch (...) {
    drop_kept_aside(name);
    throw;
  }
  restore_on_failure.keep();
  return added;
}

size_t Model::add_weighted_ia3(const std::vector<const LoraAdapters*>& sources, const std::vector<double>& weights,
                               const std::string& name, const WeightedCombination& how) {
  require(how.combination_type == "linear", "add_weighted_adapter over IA3 adapters sums their vectors ",
          "(combination_type \"linear\"; PEFT's IA3 takes no other), not \"", how.combination_type, "\"");
  LoraConfig combined = sources.front()->config();
  combine_targets(sources, &combined);
  combine_feedforward(sources, &combined);
  RandomStreamRestorer restore_on_failure;
  const size_t added = add_named_lora(name, combined);  // PEFT's inject_adapter: drawn, then frozen aside
  try {
    at::NoGradGuard no_grad;
    for (const auto& target : inactive_.at(name).adapters()) {
      // PEFT's: zeroed, then each adapter's vector of the layer times its weight added in turn.
      at::Tensor sum = at::zeros_like(target.ia3);
      for (size_t i = 0; i < sources.size(); ++i)
        for (const auto& adapter : sources[i]->adapters()) {
          if (adapter.site.module != target.site.module) continue;
          require(adapter.ia3.sizes() == target.ia3.sizes(), "add_weighted_adapter: the IA3 vector of '",
                  adapter.site.module, "' has shape ", adapter.ia3.sizes(), " in one adapter and ", target.ia3.sizes(),
                  " in the combination (it scales the layer's input in one and its output in the other)");
          sum.add_(adapter.ia3 * weights[i]);
        }
      target.ia3.copy_(sum);
    }
  } catch (...) {
    drop_kept_aside(name);
    throw;
  }
  restore_on_failure.keep();
  return added;
}

void Model::merge_lora_adapters(const std::vector<std::string>& names) {
  require(!names.empty(), "merge: no adapter named to merge");
  require_merging_free();
  require(sharded_at_rest_.empty(), "merge: the model is prepared under zero_stage 3, which holds only slices of its ",
          "weights and adapters");
  require_weights("merge_lora");
  std::vector<const LoraAdapters*> merged;
  for (const auto& name : names) {
    const LoraAdapters* adapters = nullptr;
    if (!lora_.empty() && name == active_adapter_)
      adapters = &lora_;
    else if (const auto it = inactive_.find(name); it != inactive_.end())
      adapters = &it->second;
    require(adapters != nullptr, "merge: the model has no adapter named '", name, "'");
    adapters->require_mergeable("merging the adapters");  // every one before any weight changes
    merged.push_back(adapters);
  }
  // Each adapter merges on what the ones before it merged; one that fails (out of memory) gives the
  // weights back as they were, so a refusal changes nothing (a quantised layer's codes excepted).
  std::vector<std::pair<at::Tensor, at::Tensor>> before;
  if (merged.size() > 1)
    for (const LoraAdapters* adapters : merged)
      for (const auto& adapter : adapters->adapters())
        for (const at::Tensor& t : {adapter.site.weight, adapter.site.bias})
          if (t.defined() && !adapter.site.quantized) before.emplace_back(t, t.detach().clone());
  try {
    std::unordered_map<const c10::TensorImpl*, at::Tensor> unmerged;
    for (const auto& [tensor, value] : before) unmerged.emplace(tensor.unsafeGetTensorImpl(), value);
    for (const LoraAdapters* adapters : merged) adapters->merge_into_weights(&unmerged);
  } catch (...) {
    at::NoGradGuard no_grad;
    for (auto& [tensor, value] : before) tensor.copy_(value);
    throw;
  }
  ++merges_;
  take_active_adapters();  // PEFT's unload: the active adapter's copies of the modules it saves stay
  forget_named_adapters();
}

void Model::forget_named_adapters() {
  inactive_.clear();
  adapter_order_.clear();
  active_adapter_ = "default";
}

std::unique_ptr<MixedBatch> Model::mixed_batch(const std::vector<std::string>& names) const {
  OutputWiring wiring;
  for (const LinearSite& site : linear_sites())
    if (site.set_output_adapter) wiring.emplace(site.module, site.set_output_adapter);
  return std::make_unique<MixedBatch>(lora(), active_adapter(), inactive_adapters(), names, is_training(), wiring);
}

}  // namespace acc

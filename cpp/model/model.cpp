#include "model/model.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <tuple>

#include <iterator>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/files.h"
#include "common/name_patterns.h"
#include "common/random.h"
#include "common/text.h"
#include "model/peft/adalora.h"
#include "model/peft/factor_methods.h"
#include "model/peft/ia3.h"
#include "model/peft/lora_files.h"
#include "model/peft/lycoris.h"
#include "model/peft/oft.h"
#include "model/peft/shira.h"
#include "model/peft/vera.h"
#include "model/state_dict_order.h"

namespace acc {

void save_archive_atomically(const std::string& path, const std::function<void(std::ostream& out)>& save) {
  write_through_temporary(path, [&](const std::string& temporary) { write_stream(temporary, save); });
}

namespace {

// One zero expanded to `like`'s shape: a weight that takes no memory until it is filled.
at::Tensor placeholder(const at::Tensor& like, const at::TensorOptions& options) {
  return at::zeros({}, options).expand(like.sizes());
}

// (A 0-dimensional placeholder is a real one-element tensor already: nothing to fill or keep.)
bool is_placeholder(const at::Tensor& t) {
  const auto strides = t.strides();
  return t.dim() > 0 && std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 0; });
}

}  // namespace

void make_placeholders(const NamedTensors& tensors) {
  for (const auto& entry : tensors) {
    at::Tensor t = entry.second;
    if (!is_placeholder(t)) t.set_data(placeholder(t, t.options()));  // (a spec model's are made layer by layer)
  }
}

void fill_placeholders(const std::vector<at::Tensor>& tensors, c10::optional<at::Device> device) {
  for (at::Tensor t : tensors)
    if (is_placeholder(t)) t.set_data(at::empty(t.sizes(), t.options().device(device.value_or(t.device()))));
}

void Model::make_weights_pending() {
  make_placeholders(named_parameters());
  make_placeholders(named_buffers());
  weights_pending_ = true;
}

void Model::materialize_weights(c10::optional<at::Device> device, bool parameters_too) {
  if (!weights_pending_) return;
  auto tensors_of = [](const NamedTensors& named) {
    std::vector<at::Tensor> out;
    for (const auto& entry : named) out.push_back(entry.second);
    return out;
  };
  if (parameters_too) fill_placeholders(tensors_of(named_parameters()), device);
  fill_placeholders(tensors_of(named_buffers()), device);
  weights_pending_ = !parameters_too;
}

bool Model::recompute_batch_norm(const InputSource&) {
  for (const auto& [name, buffer] : named_buffers())
    if (name == "running_mean" || ends_with(name, ".running_mean"))
      fail(Status::Unsupported, "update_bn: '", name,
           "' is a BatchNorm layer's statistic in a TorchScript model, whose ",
           "momentum is a constant of the graph, so its running statistics cannot become the plain averages ",
           "update_bn computes (PyTorch's update_bn finds no BatchNorm in a scripted module and leaves them as they ",
           "are); build the model from a layer spec to recompute them");
  return false;
}

void Model::require_weights(const char* action) const {
  if (weights_pending_)
    fail(Status::NotInitialized, action, ": this process's model has no weights yet (cpu_ram_efficient_loading / ",
         "zero3_init_flag: only the main process builds them); prepare it to receive the main process's weights");
}

void Model::require_whole_parameters(const char* action) const {
  if (sharded_at_rest())
    fail(Status::InvalidArgument, action, ": the model is sharded at rest (zero_stage 3): each process holds only ",
         "slices of its parameters, the model's own tensors are empty; acc_get_state_dict gives the full weights ",
         "(every process calls it), and weights are loaded before acc_prepare or by acc_load_state");
}

namespace {

// Whether to(device, dtype) changes `t` (only floating tensors take the dtype).
bool moved_by(const at::Tensor& t, c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype) {
  return t.device() != device.value_or(t.device()) || (dtype && t.is_floating_point() && t.scalar_type() != *dtype);
}

}  // namespace

void Model::to(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype) {
  // As transformers' .to(dtype) on a quantised model: its layers compute in bnb_4bit_compute_dtype
  // or their input's dtype.
  if (dtype && has_quantized_layers())
    fail(Status::InvalidArgument, "a model with quantised layers cannot be cast to ", *dtype, ": its 4-bit layers ",
         "compute in bnb_4bit_compute_dtype (set it when quantising), its 8-bit ones in their input's dtype; moving ",
         "it to a device is allowed");
  at::NoGradGuard no_grad;
  auto move = [&](at::Tensor& t) {
    if (!moved_by(t, device, dtype)) return;
    const at::ScalarType target = dtype && t.is_floating_point() ? *dtype : t.scalar_type();
    if (weights_pending_ && is_placeholder(t))
      return t.set_data(placeholder(t, t.options().device(device.value_or(t.device())).dtype(target)));
    // set_data keeps the tensor object that optimizers and the module hold.
    t.set_data(t.to(device.value_or(t.device()), target));
    if (t.grad().defined()) t.mutable_grad() = t.grad().to(t.device(), target);
  };
  for (auto& entry : named_parameters()) move(entry.second);
  for (auto& entry : named_buffers()) move(entry.second);
  for (auto& kept : inactive_) {
    for (auto& entry : kept.second.named_parameters()) move(entry.second);
    for (auto& entry : kept.second.named_buffers()) move(entry.second);
    kept.second.move_originals(device, dtype);
  }
  lora_.move_originals(device, dtype);
}

void Model::require_movable(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype) const {
  const std::string& reason = flat_parameters();
  if (reason.empty()) return;
  for (const auto& entry : named_parameters())
    if (moved_by(entry.second, device, dtype))
      fail(Status::InvalidArgument, "the model cannot be moved or cast now: ", reason);
}

void Model::weights_arrived() {
  weights_pending_ = false;
  lora_.keep_originals_again();  // the modules to save as the main process sent them
}

void Model::set_sharded_at_rest(std::string reason) {
  if (!reason.empty())
    lora_.drop_originals(
        "under zero_stage 3 no process keeps those modules as they were (stage 3 holds slices of them)");
  sharded_at_rest_ = std::move(reason);
}

NamedTensors Model::state_dict() const {
  require_weights("state_dict");
  // The adapters' shared tensors (VeRA's projections, RandLoRA's bases) are PEFT's model's own, not
  // a layer's: last, where PEFT's state_dict() lists them.
  std::set<std::string> shared;
  for (const auto& entry : shared_state_buffers(lora())) shared.insert(entry.first);
  NamedTensors buffers, last;
  for (auto& entry : named_buffers()) (shared.count(entry.first) ? last : buffers).push_back(std::move(entry));
  NamedTensors out = in_state_dict_order(named_parameters(), std::move(buffers), module_order());
  for (auto& entry : last) out.push_back(std::move(entry));
  for (auto& entry : out) entry.second = entry.second.detach();
  return out;
}

NamedTensors Model::kept_original_modules() const {
  NamedTensors out;
  if (lora_.empty()) return out;
  for (const auto& [name, kept] : lora_.kept_originals()) out.emplace_back(original_module_name(name), kept);
  return out;
}

std::string Model::original_module_name(const std::string& name) const {
  const LoraConfig& config = lora_.config();
  const bool tuned = !config.tuned_module(name).empty();  // (PEFT's LNTuningLayer keeps it as base_layer)
  std::string module = config.saving_module(name);
  if (module.empty()) module = enclosing_module(name);
  return module + (tuned ? ".base_layer" : ".original_module") + name.substr(module.size());
}

std::set<std::string> Model::original_module_names() const {
  std::set<std::string> out;
  if (lora_.empty()) return out;
  for (const NamedTensors& tensors : {named_parameters(), named_buffers()})
    for (const auto& entry : tensors)
      if (lora_.config().saves(entry.first)) out.insert(original_module_name(entry.first));
  return out;
}

namespace {

// Every name a tensor has in the model: a tied weight under each of its names (as PyTorch's
// state_dict()), and the kept originals of its modules to save (kept_original_modules' names: a
// state dict may hold them, as save_state writes them, and need not).
// Each with its place in the model's order (PyTorch's load_state_dict copies in that order, so of
// a tied weight given under several names the last of them in the model wins).
struct OwnTensor {
  at::Tensor tensor;
  size_t place;
};
std::unordered_map<std::string, OwnTensor> own_tensors(const Model& model) {
  std::unordered_map<std::string, OwnTensor> own;
  for (const NamedTensors& tensors :
       {model.named_parameters_with_ties(), model.named_buffers(), model.kept_original_modules()})
    for (auto& entry : tensors) own.emplace(entry.first, OwnTensor{entry.second, own.size()});
  return own;
}

std::set<std::string> optional_names(const Model& model) {
  std::set<std::string> names;
  for (const auto& entry : model.kept_original_modules()) names.insert(entry.first);
  return names;
}

std::set<std::string> buffer_names(const Model& model) {
  std::set<std::string> names;
  for (const auto& entry : model.named_buffers()) names.insert(entry.first);
  return names;
}

using KeyReport = std::pair<std::vector<std::string>, std::vector<std::string>>;

// The checks of load_state_dict against the model's tensors by name: missing / unexpected names.
// `any_length`: entries whose length may differ from the model's (4-bit layers' JSON texts).
KeyReport check_against(const std::unordered_map<std::string, OwnTensor>& own, const std::set<std::string>& buffers,
                        const std::set<std::string>& optional, const NamedTensors& state, bool strict,
                        const std::function<bool(const std::string&)>& any_length) {
  std::set<std::string> given, unexpected, missing;
  std::unordered_set<const c10::TensorImpl*> given_tensors;
  for (auto& entry : state) {
    given.insert(entry.first);
    const auto it = own.find(entry.first);
    if (it == own.end())
      unexpected.insert(entry.first);
    else
      given_tensors.insert(it->second.tensor.unsafeGetTensorImpl());
  }
  // A tied weight given under one of its names is not missing under the others (safetensors'
  // save_model keeps one name of shared tensors, and its load_model counts the others loaded).
  for (auto& entry : own)
    if (!given.count(entry.first) && !given_tensors.count(entry.second.tensor.unsafeGetTensorImpl()) &&
        !optional.count(entry.first))
      missing.insert(entry.first);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string message = "state dict does not match the model:";
    if (!missing.empty()) {
      message += " missing keys:";
      bool buffer_missing = false;
      for (auto& k : missing) {
        message += " " + k;
        buffer_missing = buffer_missing || buffers.count(k);
      }
      // TorchScript does not keep register_buffer's persistent=False, and Hugging Face files leave such buffers out.
      if (buffer_missing)
        message +=
            " (a missing buffer may be one registered with persistent=False, which saved weights leave out; "
            "strict 0 loads the rest and still reports the missing names)";
      message += ";";
    }
    if (!unexpected.empty()) {
      message += " unexpected keys:";
      for (auto& k : unexpected) message += " " + k;
    }
    fail(Status::InvalidArgument, message);
  }
  for (auto& entry : state) {
    auto it = own.find(entry.first);
    if (it == own.end()) continue;
    const at::Tensor& mine = it->second.tensor;
    require(mine.sizes() == entry.second.sizes() || any_length(entry.first), "state dict entry '", entry.first,
            "' has shape ", entry.second.sizes(), " but the model's has ", mine.sizes());
    require_same_dtype_kind(entry.first, entry.second, mine);
  }
  return {std::vector<std::string>(missing.begin(), missing.end()),
          std::vector<std::string>(unexpected.begin(), unexpected.end())};
}

}  // namespace

void require_same_dtype_kind(const std::string& name, const at::Tensor& given, const at::Tensor& own) {
  const auto kind = [](const at::Tensor& t) {
    return t.is_floating_point() ? 0 : t.is_complex() ? 1 : t.scalar_type() == at::kBool ? 2 : 3;
  };
  require(kind(own) == kind(given), "state dict entry '", name, "' is ", given.scalar_type(), " but the model's is ",
          own.scalar_type());
  // Integers of another type are cast as PyTorch's copy_ casts them; one that the model's type
  // cannot hold would wrap.
  if (kind(own) == 3 && own.scalar_type() != given.scalar_type() && given.numel() > 0)
    require(at::equal(given.to(own.scalar_type()).to(given.scalar_type()), given), "state dict entry '", name,
            "' holds ", given.scalar_type(), " values that the model's ", own.scalar_type(), " cannot hold");
}

std::pair<std::vector<std::string>, std::vector<std::string>> Model::check_state_dict(const NamedTensors& state,
                                                                                      bool strict) const {
  auto result = check_against(own_tensors(*this), buffer_names(*this), optional_names(*this), state, strict,
                              [this](const std::string& name) { return is_quantization_text(name); });
  check_quantization_state(state);
  return result;
}

std::pair<std::vector<std::string>, std::vector<std::string>> Model::load_state_dict(const NamedTensors& state,
                                                                                     bool strict) {
  // Every check first, so a failed load leaves the model as it was.
  const auto own = own_tensors(*this);
  const std::set<std::string> originals = optional_names(*this);
  KeyReport result;
  try {
    result = check_against(own, buffer_names(*this), originals, state, strict,
                           [this](const std::string& name) { return is_quantization_text(name); });
  } catch (const Error& e) {
    if (sharded_at_rest_.empty()) throw;
    fail(e.status(), e.what(), " (the model is prepared under zero_stage 3: each process holds slices of its ",
         "parameters, empty tensors in the model itself; load whole weights before preparing, or with acc_load_state)");
  }
  check_quantization_state(state);
  if (weights_pending_) return result;  // the main process's weights arrive when preparing (as transformers skips it)
  at::NoGradGuard no_grad;
  // In the model's order, whatever the state's (a file's is its data's), as PyTorch copies them.
  std::vector<std::pair<size_t, const NamedTensors::value_type*>> copies;
  for (auto& entry : state) {
    auto it = own.find(entry.first);
    if (it != own.end() && !is_quantization_text(entry.first)) copies.emplace_back(it->second.place, &entry);
  }
  std::stable_sort(copies.begin(), copies.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [place, entry] : copies) own.at(entry->first).tensor.copy_(entry->second);
  quantization_state_loaded(state);
  // Every original of the modules to save given: their values are known (again).
  size_t given = 0;
  for (const auto& entry : state) given += originals.count(entry.first);
  if (!originals.empty() && given == originals.size()) lora_.originals_known_again();
  return result;
}

std::vector<at::Tensor> Model::trainable_parameters() const {
  std::vector<at::Tensor> out;
  for (auto& entry : named_parameters())
    if (entry.second.requires_grad()) out.push_back(entry.second);
  return out;
}

std::vector<std::vector<std::string>> Model::parameter_units() const {
  std::vector<std::string> names;
  for (const auto& entry : named_parameters()) names.push_back(entry.first);
  return {names};
}

std::vector<std::string> Model::parameter_names_matching(const std::string& patterns) const {
  const NamePatterns match(patterns);
  const NamedTensors params = named_parameters();
  std::vector<std::string> names;
  for (const auto& entry : params)
    if (match.matches(entry.first)) names.push_back(entry.first);
  require(!names.empty(), "no parameter name matches '", patterns, "' (names look like '",
          params.empty() ? std::string("<none>") : params.front().first, "')");
  return names;
}

std::shared_ptr<void> Model::hold_trainable_set(std::string reason, bool freezing_too, bool merging_too) {
  auto hold = std::make_shared<TrainableSetHold>(TrainableSetHold{std::move(reason), freezing_too, merging_too});
  holds_.erase(std::remove_if(holds_.begin(), holds_.end(), [](const auto& h) { return h.expired(); }), holds_.end());
  holds_.push_back(hold);
  return hold;
}

void Model::require_trainable_set_free(bool freezing) const {
  for (const auto& weak : holds_)
    if (auto hold = weak.lock(); hold && (!freezing || hold->freezing_too)) fail(Status::InvalidArgument, hold->reason);
}

void Model::require_merging_free() const {
  for (const auto& weak : holds_)
    if (auto hold = weak.lock(); hold && hold->merging_too) fail(Status::InvalidArgument, hold->reason);
}

size_t Model::set_requires_grad(const std::string& patterns, bool requires_grad) {
  require_trainable_set_free(/*freezing=*/!requires_grad);
  const auto names = parameter_names_matching(patterns);
  if (requires_grad)  // as PyTorch's requires_grad_ on an integer tensor
    for (const auto& name : names) {
      const at::Tensor p = find_tensor(name);
      require(p.is_floating_point(), "'", name, "' cannot be trained: it holds ", p.scalar_type(),
              " values (a quantised layer's weight); leave it out of the pattern");
    }
  for (const auto& name : names) {
    at::Tensor p = find_tensor(name);
    p.set_requires_grad(requires_grad);
    if (!requires_grad) p.mutable_grad() = at::Tensor();  // a frozen parameter keeps no stale gradient
  }
  return names.size();
}

std::vector<at::Tensor> Model::gradients() const {
  std::vector<at::Tensor> out;
  for (const auto& p : trainable_parameters())
    if (p.grad().defined()) out.push_back(p.grad());
  return out;
}

at::Tensor Model::find_tensor(const std::string& name) const {
  for (auto& entry : named_parameters())
    if (entry.first == name) return entry.second;
  for (auto& entry : named_buffers())
    if (entry.first == name) return entry.second;
  fail(Status::InvalidArgument, "the model has no parameter or buffer named '", name, "'");
}

void Model::zero_grad() {
  for (auto& entry : named_parameters())
    if (entry.second.grad().defined()) entry.second.mutable_grad().reset();
  if (zero_kept_gradients_) zero_kept_gradients_();
}

void Model::save_torchscript(const std::string& path) const {
  if (!sharded_at_rest_.empty()) fail(Status::InvalidArgument, sharded_at_rest_);
  require_no_quantized_layers("save_torchscript (its layers' forwards would read quantised codes as weights)");
  require_weights("save_torchscript");
  const LoraAdapters& adapters = lora();
  if (adapters.empty()) return write_torchscript(path);
  // The file is the deployable model: merged weights, written from a merged copy put in place for
  // the write and taken out after (the adapters here stay as they were).
  at::NoGradGuard no_grad;
  // Each tensor merging may change, and a copy: the weights, and the biases some merges scale or add
  // to ((IA)^3's, lora_bias, RoAd's).
  std::vector<std::pair<at::Tensor, at::Tensor>> kept;
  for (const auto& adapter : adapters.adapters())
    for (const at::Tensor& t : {adapter.site.weight, adapter.site.bias})
      if (t.defined()) kept.emplace_back(t, t.clone());
  for (const auto& tokens : adapters.tokens().adapters())
    kept.emplace_back(tokens.site.weight, tokens.site.weight.clone());
  auto restore = [&] {
    for (auto& [weight, copy] : kept) weight.copy_(copy);
  };
  adapters.merge_into_weights();
  try {
    write_torchscript(path);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

namespace {

// Refuses modules_to_save that match no parameter or hold a layer the config adapts.
void check_modules_to_save(const LoraConfig& config, const NamedTensors& parameters,
                           const std::vector<LinearSite>& sites) {
  if (config.modules_to_save.empty()) return;
  std::string names;
  for (const auto& name : config.modules_to_save) names += (names.empty() ? "" : ",") + name;
  bool any = false;  // (LN tuning's targets train whole too: they do not count here)
  for (const auto& entry : parameters)
    any = any || (config.saves(entry.first) && config.tuned_module(entry.first).empty());
  require(any || !config.modules_to_save_given, "modules_to_save '", names,
          "' matches no module that holds parameters (a module matches a name its ", "own name ends with)");
  if (config.peft_type == PeftType::LnTuning) return;  // (its targets train whole too)
  for (const auto& site : sites)
    require(adapts_parameter(site) || !config.targets(site.module) || !config.saves(site.module + ".weight"),
            "modules_to_save '", names, "' holds '", site.module,
            "', which target_modules adapts: train a module whole or adapt it, not both");
}

// PEFT's ModulesToSaveWrapper and LN tuning train a copy of each module, which unties a tensor it
// shares with another module (a head tied to the embedding; two modules to save get a copy each);
// here modules train in place, which would train that module with it: refused (Unsupported) rather
// than compute otherwise. `names`: every name of each parameter (a tied one under each).
void refuse_shared_trained_whole(const LoraConfig& config,
                                 const std::unordered_multimap<const c10::TensorImpl*, std::string>& names) {
  for (const auto& [impl, name] : names) {
    if (!config.saves(name)) continue;
    const auto [first, last] = names.equal_range(impl);
    for (auto it = first; it != last; ++it)
      if (it->second != name)
        fail(Status::Unsupported, config.peft_type == PeftType::LnTuning ? "LN tuning" : "modules_to_save",
             " would train '", name, "', which '", it->second, "' shares (tied): PEFT trains a copy of the module, ",
             "untying them, and this library trains modules in place, which would change '", it->second,
             "' too (not built); leave the module out, or untie the weights in the model");
  }
}

// The adapted layers (PEFT's LoRA layers, whose bias lora_only trains; not the modules whose
// parameters are adapted themselves, which PEFT's ParamWrapper leaves as they are).
std::set<std::string> adapted_modules(const LoraAdapters& adapters) {
  std::set<std::string> out;
  for (const auto& adapter : adapters.adapters())
    if (!adapts_parameter(adapter.site)) out.insert(adapter.site.module);
  return out;
}

// PEFT wraps the module of a targeted parameter, so the names its files give that module's other
// tensors differ from the model's ("<module>.base_layer.<name>"): training them whole beside such
// adapters (modules_to_save, bias) is not built.
void refuse_trained_whole_in_wrapped_modules(const std::map<std::string, at::Tensor>& trained,
                                             const std::vector<LinearSite>& chosen) {
  for (const auto& site : chosen) {
    if (!adapts_parameter(site)) continue;
    const std::string module = enclosing_module(site.parameter) + ".";
    for (const auto& entry : trained)
      if (entry.first.rfind(module, 0) == 0)
        fail(Status::Unsupported, "'", entry.first, "' would train whole (modules_to_save, bias) in the module whose ",
             "parameter '", site.parameter, "' target_parameters adapts: not built");
  }
}

// What a LoRA config trains whole beside its adapters and saves with them: the modules to save's
// parameters and buffers, and the biases its bias setting trains (`adapted`: the adapted layers).
std::map<std::string, at::Tensor> trained_whole(const LoraConfig& config, const NamedTensors& parameters,
                                                const NamedTensors& buffers, const std::set<std::string>& adapted) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, tensor] : parameters)
    // lora_B's own bias (lora_bias) is the adapter's, whatever bias "all" says of names ending in ".bias".
    if (!ends_with(name, kLoraBBiasSuffix) && config.trains_whole(name, adapted.count(enclosing_module(name)) > 0))
      out.emplace(name, tensor);
  for (const auto& [name, tensor] : buffers)
    if (config.saves(name)) out.emplace(name, tensor);
  return out;
}

// The adapted layers by their names in PEFT's files: an attention's out_proj adapted with it is
// "<attention>.base_layer.out_proj" (PEFT's lora.MultiheadAttention wraps it inside its base layer).
std::map<std::string, std::string> peft_layer_names(const LoraAdapters& adapters) {
  std::map<std::string, std::string> out;
  for (const auto& adapter : adapters.adapters())
    if (!adapts_parameter(adapter.site))
      out.emplace(adapter.site.module,
                  adapter.site.owner.empty() ? adapter.site.module : adapter.site.owner + ".base_layer.out_proj");
  return out;
}

// PEFT's name in the adapter file for a tensor trained whole: an adapted layer's bias lives on its
// base layer; the others keep the model's name.
std::string peft_file_name(const std::string& name, const std::map<std::string, std::string>& adapted) {
  const auto layer = adapted.find(enclosing_module(name));
  return layer != adapted.end() && ends_with(name, ".bias") ? layer->second + ".base_layer.bias" : name;
}

}  // namespace

std::vector<LinearSite> Model::adaptable_sites() const {
  std::vector<LinearSite> sites = linear_sites();
  for (auto& site : parameter_sites()) sites.push_back(std::move(site));
  return sites;
}

LoraConfig Model::with_all_linear(const LoraConfig& config) const {
  LoraConfig out = config;
  out.all_linear = false;
  std::vector<std::string> linear;
  for (const auto& site : linear_sites())
    if (!site.conv && !site.embedding && !site.attention) linear.push_back(site.module);
  // transformers' get_output_embeddings, by convention (no Python to ask): the first of the names
  // its causal and masked language models give their output layer that is a linear layer here.
  std::string output;
  if (is_transformers_model())
    for (const char* name : {"lm_head", "embed_out", "proj_out", "cls.predictions.decoder"})
      if (output.empty() && std::find(linear.begin(), linear.end(), name) != linear.end()) output = name;
  for (auto& module : linear)
    if (module != output) out.target_names.push_back(std::move(module));
  require(!out.target_names.empty(), "target_modules 'all-linear' matches no linear layer (nn.Linear, transformers' ",
          "Conv1D) of this model",
          output.empty() ? "" : " but its output layer '" + output + "', which PEFT leaves out");
  return out;
}

size_t Model::add_lora(const LoraConfig& config) {
  if (config.all_linear) return add_lora(with_all_linear(config));
  RandomStreamRestorer restore_on_failure;
  const size_t added = add_adapters(config);
  restore_on_failure.keep();
  return added;
}

size_t Model::add_adapters(const LoraConfig& config) {
  require_trainable_set_free(/*freezing=*/false);
  if (config.peft_type == PeftType::TrainableTokens) {
    const size_t added = lora_.add_tokens(config, token_sites(), other_module_names());
    freeze_all_but_adapters({});  // PEFT's _mark_only_adapters_as_trainable
    return added;
  }
  std::vector<LinearSite> sites = adaptable_sites();
  // A layer whose weight the model also holds under another name shares it with that module (tied).
  std::unordered_multimap<const c10::TensorImpl*, std::string> names;
  for (const auto& entry : named_parameters_with_ties()) names.emplace(entry.second.unsafeGetTensorImpl(), entry.first);
  for (auto& site : sites) {
    const auto [first, last] = names.equal_range(site.weight.unsafeGetTensorImpl());
    for (auto it = first; it != last && site.tied_to.empty(); ++it)
      if (it->second != weight_name(site)) site.tied_to = it->second;
  }
  check_modules_to_save(config, named_parameters_with_ties(), sites);
  refuse_shared_trained_whole(config, names);
  for (const auto& entry : named_parameters())  // trained whole: as PyTorch, floating point only
    if (config.saves(entry.first) && !entry.second.is_floating_point())
      fail(Status::Unsupported, "modules_to_save would train '", entry.first, "', which holds ",
           entry.second.scalar_type(), " values (a quantised layer's weight); leave its module out of modules_to_save");
  if (!config.target_parameters.empty())
    refuse_trained_whole_in_wrapped_modules(trained_whole(config, named_parameters(), named_buffers(), {}),
                                            targeted_sites(config, sites));
  // PEFT's ModulesToSaveWrapper keeps each module to save as it was, for a disabled forward.
  NamedTensors saved_modules;
  for (const NamedTensors& tensors : {named_parameters(), named_buffers()})
    for (const auto& entry : tensors)
      if (config.saves(entry.first)) saved_modules.push_back(entry);
  const size_t added = lora_.add(config, sites, other_module_names(), token_sites(), saved_modules, weights_pending_);
  // PEFT trains the adapters alone, the modules to save (its ModulesToSaveWrapper trains a copy of
  // each, which computes as the module does) and the biases its bias setting names.
  freeze_all_but_adapters(trained_whole(config, named_parameters(), {}, adapted_modules(lora_)));
  return added;
}

Model::BaseFlags Model::base_flags() const {
  BaseFlags flags;
  std::unordered_set<const c10::TensorImpl*> adapters;
  for (const auto& entry : lora_.named_parameters()) adapters.insert(entry.second.unsafeGetTensorImpl());
  for (const auto& [name, tensor] : named_parameters())
    if (!adapters.count(tensor.unsafeGetTensorImpl())) flags.requires_grad[name] = tensor.requires_grad();
  if (!lora_.empty())
    for (const auto& entry : trained_whole(lora_.config(), named_parameters(), {}, adapted_modules(lora_)))
      flags.trained_whole.insert(entry.first);
  return flags;
}

void Model::restore_base_flags(const BaseFlags& before) {
  const BaseFlags now = base_flags();
  for (auto& [name, tensor] : named_parameters()) {
    const auto was = before.requires_grad.find(name);
    if (!now.requires_grad.count(name) || was == before.requires_grad.end() || now.trained_whole.count(name)) continue;
    const bool trains = was->second && !before.trained_whole.count(name);
    if (tensor.requires_grad() == trains) continue;
    tensor.set_requires_grad(trains);
    if (!trains) tensor.mutable_grad() = at::Tensor();
  }
}

void Model::freeze_all_but_adapters(const std::map<std::string, at::Tensor>& trained_whole) {
  std::unordered_set<const c10::TensorImpl*> adapters;
  for (const auto& entry : lora_.named_parameters()) adapters.insert(entry.second.unsafeGetTensorImpl());
  for (auto& entry : named_parameters()) {
    if (adapters.count(entry.second.unsafeGetTensorImpl())) continue;
    const bool trains = trained_whole.count(entry.first) > 0;
    entry.second.set_requires_grad(trains);
    if (!trains) entry.second.mutable_grad() = at::Tensor();
  }
}

void Model::save_lora(const std::string& dir) const {
  const LoraConfig& config = lora().config();
  NamedTensors saved;
  if (config.trains_modules_whole()) {
    require_weights("save_lora");
    const auto adapted = adapted_modules(lora());
    const auto layers = peft_layer_names(lora());
    for (const auto& [name, tensor] : trained_whole(config, named_parameters(), named_buffers(), adapted))
      saved.emplace_back(peft_file_name(name, layers), tensor.detach());
  }
  // PEFT's save_pretrained: "default" in `dir`, each other adapter in a folder of its name there.
  const auto place = [&](const std::string& name) { return name == "default" ? dir : dir + "/" + name; };
  // A name no folder can have would fail its save after the others were written: refused first.
  constexpr size_t kLongestFolderName = 255;  // (NAME_MAX of Linux's file systems, NTFS' and APFS')
  for (const std::string& name : adapter_names())
    require(name.size() <= kLongestFolderName, "save_lora: the adapter name '", name.substr(0, 40), "...' (",
            name.size(), " bytes) is longer than a folder's name can be (", kLongestFolderName,
            " bytes); nothing was written");
  // So would a folder holding what no save can replace (a file in a folder's place).
  for (const std::string& name : adapter_names()) require_lora_folder_writable(place(name));
  save_lora_files(place(active_adapter()), lora(), saved);
  for (const auto& [name, kept] : inactive_adapters()) {
    NamedTensors kept_saved;  // its own copies of the modules it saves
    const auto layers = peft_layer_names(kept);
    for (const auto& [tensor_name, value] : kept.saved_modules_aside())
      kept_saved.emplace_back(peft_file_name(tensor_name, layers), value);
    save_lora_files(place(name), kept, kept_saved);
  }
}

namespace {

// The rows each layer trains.
std::map<std::string, std::vector<int64_t>> rows_of(const std::vector<TokenAdapter>& tokens) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& adapter : tokens) out[adapter.site.module] = adapter.indices;
  return out;
}

// Checks that `files` (found in `where`) holds a delta of each of `adapters`' shape, under its
// layer's name, and no other; `standalone` (PEFT's TRAINABLE_TOKENS, whose file has the tied
// layers' too): a tied layer's equal to its embedding's.
void check_token_tensors(const std::vector<TokenAdapter>& adapters, const std::map<std::string, at::Tensor>& files,
                         const std::string& where, bool standalone) {
  const char* suffix = standalone ? kStandaloneTokenDeltaSuffix : kTokenDeltaSuffix;
  const char* setting = standalone ? "token_indices" : "trainable_token_indices";
  std::map<std::string, const TokenAdapter*> expected, tied;
  for (const auto& adapter : adapters) {
    expected[adapter.site.module] = &adapter;
    for (const auto& layer : adapter.tied) tied[layer.module] = &adapter;
  }
  for (const auto& [module, adapter] : expected) {
    auto it = files.find(module);
    if (it == files.end())
      fail(Status::InvalidArgument, where, " holds no '", module, suffix, "', which its ", setting, " trains");
    require(it->second.sizes() == adapter->delta.sizes(), where, ": '", module, suffix, "' has shape ",
            it->second.sizes(), " there; its ", adapter->indices.size(), " tokens of '", module, "' take ",
            adapter->delta.sizes());
  }
  for (const auto& [module, tensor] : files) {
    if (expected.count(module)) continue;
    auto it = tied.find(module);
    require(standalone && it != tied.end(), where, " holds '", module, suffix, "', a layer its ", setting,
            " does not name");
    const at::Tensor& own = files.at(it->second->site.module);
    require(tensor.sizes() == own.sizes() && tensor.scalar_type() == own.scalar_type() && at::equal(tensor, own), where,
            ": '", module, suffix, "' (tied to '", it->second->site.module, "') differs from '",
            it->second->site.module, suffix, "'");
  }
}

}  // namespace

void Model::load_trainable_tokens(const LoraFiles& files, const std::string& where) {
  std::vector<TokenAdapter> file_tokens;
  try {
    file_tokens = TrainableTokens::make_standalone(files.config, token_sites(), other_module_names());
  } catch (const Error& e) {
    fail(e.status(), where, ": ", e.what());
  }
  check_token_tensors(file_tokens, files.tokens, where, /*standalone=*/true);
  if (!lora_.empty()) {
    require(lora_.tokens().standalone(), where, " holds trainable tokens alone (PEFT's TRAINABLE_TOKENS); the ",
            "model has LoRA adapters");
    require(rows_of(lora_.tokens().adapters()) == rows_of(file_tokens), where,
            " trains other tokens (token_indices, target_modules) than the model's");
  } else {
    require_trainable_set_free(/*freezing=*/false);  // before add_lora, whose refusal would not say "load"
    add_lora(files.config);                          // draws as PEFT's from_pretrained does where init_weights is false
  }
  at::NoGradGuard no_grad;
  for (const auto& tokens : lora_.tokens().adapters()) tokens.delta.copy_(files.tokens.at(tokens.site.module));
}

void Model::load_lora(const std::string& dir) { load_lora_files(read_lora_files(dir), "'" + dir + "'"); }

void Model::load_lora_files(LoraFiles files, const std::string& where) {
  if (files.config.all_linear) files.config = with_all_linear(files.config);
  if (files.config.peft_type == PeftType::TrainableTokens) return load_trainable_tokens(files, where);
  require(lora_.empty() || !lora_.tokens().standalone(), where, " holds LoRA adapters; the model has trainable ",
          "tokens alone (PEFT's TRAINABLE_TOKENS)");
  // The layers the file's configuration targets must be those its tensors adapt, with their shapes.
  std::map<std::string, LinearSite> targeted;
  try {
    if (files.config.peft_type != PeftType::LnTuning)  // (whose modules train whole: no layer is adapted)
      for (auto& site : targeted_sites(files.config, adaptable_sites())) targeted.emplace(site.module, std::move(site));
  } catch (const Error& e) {
    fail(e.status(), where, ": ", e.what());
  }
  const SharedTensors* shared = shared_tensors(files.config.peft_type);
  const bool ia3 = files.config.peft_type == PeftType::Ia3, adalora = files.config.peft_type == PeftType::Adalora;
  const FactorMethod* method = factor_method(files.config.peft_type);
  for (const auto& [module, pair] : files.modules) {
    auto it = targeted.find(module);
    if (it == targeted.end())
      fail(Status::InvalidArgument, where, " holds an adapter for '", module,
           "', which is not a linear layer of this model that its target_modules selects (nor a parameter its "
           "target_parameters selects)");
    const LinearSite& site = it->second;
    if (ia3) {  // the vector of the layer's shape, scaling its input where feedforward_modules says so
      const bool feedforward = files.config.is_feedforward(module);
      const std::vector<int64_t> shape = ia3_vector_shape(site, feedforward);
      require(pair.ia3.sizes() == c10::IntArrayRef(shape), where, ": the IA3 vector of '", module, "' has shape ",
              pair.ia3.sizes(), "; the layer's weight ", site.weight.sizes(), " takes ", c10::IntArrayRef(shape),
              feedforward ? " (a feedforward module: its input scaled)" : " (its output scaled)");
      continue;
    }
    if (method) {  // the tensors the configuration makes for this layer, each of its shape
      const std::vector<FactorShape> shapes = method->shapes(files.config, site);
      const char* name = peft_method_name(files.config.peft_type);
      const std::string decided_by = method->decided_by(files.config, module);
      for (const FactorShape& expected : shapes) {
        const at::Tensor* found = find_factor(pair.factors, expected.suffix);
        require(found, where, ": the ", name, " adapter of '", module, "' lacks '", module, expected.suffix,
                "', which its configuration (", decided_by, ") makes for the layer's weight ", site.weight.sizes());
        require(found->sizes() == c10::IntArrayRef(expected.shape), where, ": '", module, expected.suffix,
                "' has shape ", found->sizes(), "; with ", decided_by, " the layer's weight ", site.weight.sizes(),
                " takes ", c10::IntArrayRef(expected.shape));
      }
      require(pair.factors.size() == shapes.size(), where, ": the ", name, " adapter of '", module,
              "' holds factors its configuration does not make for the layer's weight ", site.weight.sizes(), " (",
              decided_by, ")");
      if (files.config.peft_type == PeftType::Shira) {  // the values' places, in the layer's weight
        require(pair.indices.defined(), where, ": the SHiRA adapter of '", module, "' lacks '", module, kShiraIndices,
                "', the places of its values");
        const std::string refusal =
            shira_indices_refusal(pair.indices, shapes.front().shape.front(), out_features(site), in_features(site));
        require(refusal.empty(), where, ": '", module, kShiraIndices, "' ", refusal);
      }
      continue;
    }
    const at::Tensor& w = site.weight;
    const bool embedding = site.embedding.has_value();
    require(pair.embedding == embedding, where, ": the adapter of '", module, "' is ",
            pair.embedding ? "an embedding's (lora_embedding_A/B)" : "a linear layer's (lora_A/B)", ", but '", module,
            "' is ", embedding ? "an embedding" : "not an embedding");
    // A convolution's A has its kernel (r x in x kernel), its B r / groups inputs (A takes all the
    // layer's input channels); an embedding's A is r x num_embeddings, its B dim x r.
    const int64_t groups = site.conv ? site.conv->groups : 1;
    // A targeted parameter's: A (r experts x in), B (out x r experts), its rank read from the
    // parameter's name (rank_pattern; the file's reader could not tell its experts).
    const int64_t rows = files.config.rank_of(pattern_name(site)) * std::max<int64_t>(site.experts, 1);
    const bool fits =
        adapts_parameter(site) ? pair.a.dim() == 2 && pair.a.size(0) == rows && pair.a.size(1) == in_features(site) &&
                                     pair.b.size(0) == out_features(site) && pair.b.size(1) == rows
        : embedding ? pair.a.size(1) == w.size(0) && pair.b.size(0) == w.size(1) && pair.b.size(1) == pair.a.size(0)
                    : pair.a.dim() == w.dim() && pair.a.size(1) == in_features(site) * groups &&
                          pair.b.size(0) == out_features(site) && pair.b.size(1) * groups == pair.a.size(0) &&
                          pair.a.sizes().slice(2) == w.sizes().slice(2);
    require(fits, where, ": the adapter of '", module, "' (lora_A ", pair.a.sizes(), ", lora_B ", pair.b.sizes(),
            ") does not fit ",
            adapts_parameter(site) ? "the parameter '" + site.parameter + "' " + concat(w.sizes()) + " with r " +
                                         concat(files.config.rank_of(pattern_name(site)))
                                   : "the layer's weight " + concat(w.sizes()));
    // An attention's out_proj comes with it under PEFT's name "<attention>.base_layer.out_proj".
    require(pair.owner == site.owner, where, ": the adapter of '", module, "' is ",
            pair.owner.empty() ? "the layer's own" : "that of the attention '" + pair.owner + "'", ", but ",
            site.owner.empty() ? "its configuration adapts the layer itself"
                               : "its configuration adapts it with the attention '" + site.owner + "'");
  }
  for (const auto& [module, site] : targeted)
    if (!files.modules.count(module)) fail(Status::InvalidArgument, where, " holds no adapter for '", module, "'");
  // As adding them would refuse it, also where the model has its adapters already.
  if (files.config.peft_type != PeftType::LnTuning)  // (which tunes any module)
    for (const auto& module : other_module_names())
      require(!files.config.targets(module), where, ": target_modules '", files.config.describe_targets(),
              "' matches '", module, "', which is not a linear layer; ", adaptable_layers(files.config));
  // What the file trains whole (modules to save, biases): every such tensor of this model in the
  // file, with its shape, and nothing else.
  std::set<std::string> targeted_modules;
  for (const auto& entry : targeted) targeted_modules.insert(entry.first);
  std::map<std::string, at::Tensor> saved_here;
  if (files.config.trains_modules_whole()) {
    require_weights("load_lora (modules_to_save, bias, LN tuning)");
    saved_here = trained_whole(files.config, named_parameters(), named_buffers(), targeted_modules);
  }
  for (const auto& [name, tensor] : files.saved) {
    auto it = saved_here.find(name);
    if (it == saved_here.end())
      fail(Status::InvalidArgument, where, " holds '", name, "', which is no parameter or buffer of this model that ",
           "its modules_to_save and bias train");
    require(it->second.sizes() == tensor.sizes() && it->second.is_floating_point() == tensor.is_floating_point(), where,
            ": '", name, "' is ", tensor.scalar_type(), " of shape ", tensor.sizes(), " there, ",
            it->second.scalar_type(), " of shape ", it->second.sizes(), " in the model");
  }
  for (const auto& entry : saved_here)
    if (!files.saved.count(entry.first))
      fail(Status::InvalidArgument, where, " holds no '", entry.first, "', which its modules_to_save or bias trains");
  // The rows trainable_token_indices names: each layer's delta in the file, of its shape, and nothing else.
  std::vector<TokenAdapter> file_tokens;
  try {
    file_tokens = TrainableTokens::make(files.config.token_indices, token_sites(),
                                        std::vector<std::string>(targeted_modules.begin(), targeted_modules.end()));
  } catch (const Error& e) {
    fail(e.status(), where, ": ", e.what());
  }
  check_token_tensors(file_tokens, files.tokens, where, /*standalone=*/false);
  if (shared && files.config.save_projection) {  // the file's projections, of the shapes the targeted layers give
    std::vector<LinearSite> sites;
    for (const auto& entry : targeted) sites.push_back(entry.second);
    const auto [a_shape, b_shape] = shared->shapes(files.config, sites);
    for (const auto& [name, tensor, shape] : {std::tuple{shared->file_a, files.projection_a, a_shape},
                                              std::tuple{shared->file_b, files.projection_b, b_shape}})
      require(tensor.sizes() == c10::IntArrayRef(shape), where, ": '", name, "' has shape ", tensor.sizes(),
              "; with r ", files.config.r, " the targeted layers take ", c10::IntArrayRef(shape));
  }
  if (!lora_.empty()) {
    // The same parameters trained whole.
    const auto have_whole = trained_whole(lora_.config(), named_parameters(), {}, adapted_modules(lora_));
    for (const auto& entry : named_parameters()) {
      const bool file_trains = saved_here.count(entry.first) > 0, model_trains = have_whole.count(entry.first) > 0;
      require(file_trains == model_trains, where, " trains '", entry.first, "' ", file_trains ? "whole" : "frozen",
              ", the model's adapters ", model_trains ? "whole" : "frozen");
    }
    const LoraConfig& have = lora_.config();
    require(have.peft_type == files.config.peft_type, where, " holds ", peft_type_name(files.config.peft_type),
            " adapters, the model ", peft_type_name(have.peft_type), " adapters");
    // The same layers adapted alike; target_modules may name them otherwise (PEFT writes a set, in
    // any order, or a regular expression).
    bool same_layers = lora_.size() == targeted.size();
    for (const auto& adapter : lora_.adapters()) same_layers = same_layers && targeted.count(adapter.site.module);
    require(same_layers, where, " holds adapters of other layers (", files.config.describe_targets(),
            ") than the model's (", have.describe_targets(), ")");
    require(have.lora_bias == files.config.lora_bias, where, " holds adapters with lora_bias ",
            files.config.lora_bias ? "true" : "false", ", the model's have lora_bias ",
            have.lora_bias ? "true" : "false");
    // The same rows of the same layers.
    require(rows_of(lora_.tokens().adapters()) == rows_of(file_tokens), where,
            " trains other tokens (trainable_token_indices) than the model's adapters");
    require(have.use_dora == files.config.use_dora, where, " holds ", files.config.use_dora ? "DoRA" : "plain LoRA",
            " adapters (use_dora ", files.config.use_dora ? "true" : "false", "), the model ",
            have.use_dora ? "DoRA" : "plain LoRA", " adapters");
    for (const auto& adapter : lora_.adapters())
      if (is_ia3(adapter))
        require(adapter.feedforward == files.config.is_feedforward(adapter.site.module), where, " scales the ",
                adapter.feedforward ? "output" : "input", " of '", adapter.site.module, "', the model's adapter its ",
                adapter.feedforward ? "input" : "output", " (feedforward_modules)");
    // The settings that change what the adapters of a method of factors compute (VeRA's projections,
    // OFT's rotations, AdaLoRA's scaling, ...).
    if (const FactorMethod* method = factor_method(have.peft_type)) {
      const std::string mine = method->computing_settings(have), theirs = method->computing_settings(files.config);
      require(mine == theirs, where, " holds ", peft_method_name(have.peft_type), " adapters of ", theirs,
              "; the model's have ", mine, ": they would compute otherwise");
    }
    // Each layer's rank and scaling (lora_alpha / r, or / sqrt(r) with use_rslora), patterns applied.
    for (const auto& adapter : lora_.adapters()) {
      // (the other methods of factors: their shapes, below)
      const FactorMethod* method = factor_method(adapter);
      if (is_ia3(adapter) || (method && !method->rank_and_scaling)) continue;
      const std::string& module = pattern_name(adapter.site);
      const LoraConfig& file = files.config;
      require(adapter.r == file.rank_of(module) && adapter.scaling == file.scaling_of(module), where, " adapts '",
              module, "' with r ", file.rank_of(module), ", lora_alpha ", file.alpha_of(module),
              file.use_rslora ? ", use_rslora" : "", ": scaling ", file.scaling_of(module),
              "; the model's adapter has r ", adapter.r, ", lora_alpha ", have.alpha_of(module),
              have.use_rslora ? ", use_rslora" : "", ": scaling ", adapter.scaling);
    }
    // LoHa's, LoKr's and VeRA's tensors: the same names and shapes (LoKr's decompose_both,
    // decompose_factor and use_effective_conv2d make other factors of one rank).
    auto listed = [](const NamedTensors& factors) {
      std::string text;
      for (const auto& [suffix, tensor] : factors)
        text += (text.empty() ? "" : ", ") + suffix.substr(1) + " " + concat(tensor.sizes());
      return text;
    };
    for (const auto& adapter : lora_.adapters()) {
      if (adapter.factors.empty()) continue;
      const NamedTensors& held = files.modules.at(adapter.site.module).factors;
      const NamedTensors own = factors_and_buffers(adapter);
      bool same = held.size() == own.size();
      for (const auto& [suffix, factor] : own)
        same = same && std::any_of(held.begin(), held.end(), [&, &suffix = suffix, &factor = factor](const auto& f) {
                 return f.first == suffix && f.second.sizes() == factor.sizes();
               });
      require(same, where, " holds ", listed(held), " for '", adapter.site.module, "', the model's adapter ",
              listed(own));
    }
  } else {
    require_trainable_set_free(/*freezing=*/false);  // before add_lora, whose refusal would not say "load"
    try {
      add_lora(files.config);
    } catch (const Error& e) {  // the layers' checks (a rank beyond a weight's, ...) name the file too
      fail(e.status(), where, ": ", e.what());
    }
  }
  at::NoGradGuard no_grad;
  for (const auto& adapter : lora_.adapters()) {
    const auto& pair = files.modules.at(adapter.site.module);
    if (is_ia3(adapter)) {
      adapter.ia3.copy_(pair.ia3);
      continue;
    }
    if (!adapter.factors.empty()) {  // LoHa's, LoKr's, VeRA's
      for (auto& [suffix, factor] : factors_and_buffers(adapter))
        for (const auto& [name, tensor] : pair.factors)
          if (name == suffix) factor.copy_(tensor);
      if (adapter.indices.defined()) adapter.indices.copy_(pair.indices);  // SHiRA's places
      continue;
    }
    adapter.a.copy_(pair.a);
    adapter.b.copy_(pair.b);
    if (adapter.magnitude.defined()) adapter.magnitude.copy_(pair.magnitude);
    if (adapter.b_bias.defined()) adapter.b_bias.copy_(pair.b_bias);
  }
  if (adalora) lora_.take_adalora_patterns(files.config.adalora);  // what the loaded tensors hold
  // VeRA's projections or RandLoRA's bases as the file holds them (save_projection; otherwise drawn
  // from projection_prng_key).
  if (shared && files.config.save_projection) {
    const auto& projections = lora_.adapters().front().projections;
    projections->a.copy_(files.projection_a);
    projections->b.copy_(files.projection_b);
  }
  for (const auto& [name, tensor] : files.saved) saved_here.at(name).copy_(tensor);
  for (const auto& tokens : lora_.tokens().adapters()) tokens.delta.copy_(files.tokens.at(tokens.site.module));
}

size_t Model::checkpoint_activations(const UnitPolicy&) {
  fail(Status::Unsupported, "activation_checkpointing (fsdp_activation_checkpointing) needs a layer-spec model: a ",
       "TorchScript model's submodules cannot be re-run from outside (use \"checkpoint\": true in a layer spec)");
}

void Model::merge_lora() {
  require(!lora_.empty(), "the model has no LoRA adapters or trainable tokens to merge");
  require_merging_free();
  require(sharded_at_rest_.empty(), "merge_lora: the model is prepared under zero_stage 3, which holds only slices of "
                                    "its weights and adapters; acc_save_model writes the full weights with the "
                                    "adapters merged");
  require_weights("merge_lora");
  lora_.merge_and_remove();
  ++merges_;
  forget_named_adapters();  // PEFT's merge_and_unload merges the active adapter and drops the others
}

size_t Model::quantize(const QuantizationConfig&) {
  fail(Status::Unsupported, "quantised layers are built for TorchScript models; this model is built from a layer spec");
}

size_t Model::prepare_for_kbit_training() {
  // It freezes every parameter: adapters added before would never train.
  require(lora_.empty(), "prepare_for_kbit_training comes before adding adapters (it freezes every parameter)");
  require_trainable_set_free(/*freezing=*/true);
  require_whole_parameters("prepare_for_kbit_training");
  require_weights("prepare_for_kbit_training");
  at::NoGradGuard no_grad;
  size_t cast = 0;
  for (auto& entry : named_parameters()) {
    at::Tensor& p = entry.second;
    p.set_requires_grad(false);
    p.mutable_grad() = at::Tensor();
    if (p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16) {
      p.set_data(p.to(at::kFloat));  // the same tensor: modules and adapters keep holding it
      ++cast;
    }
  }
  return cast;
}

void Model::require_no_quantized_layers(const char* action) const {
  if (has_quantized_layers()) fail(Status::Unsupported, "the model has quantised layers: ", action, " is refused");
}

c10::Device Model::device() const {
  const NamedTensors parameters = named_parameters();
  return parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().second.device();
}

void Model::forward_without_grad(const std::vector<at::Tensor>& inputs) {
  at::NoGradGuard no_grad;
  const c10::Device where = device();
  std::vector<at::Tensor> placed;
  for (const at::Tensor& input : inputs) placed.push_back(input.to(where));
  (void)forward(placed);
}

void Model::set_lora_enabled(bool enabled) {
  require(!lora_.empty(), "the model has no LoRA adapters or trainable tokens to ", enabled ? "enable" : "disable");
  const LoraConfig& config = lora_.config();
  if (!enabled && !lora_.keeps_originals())
    for (const auto& entry : named_parameters())
      if (config.saves(entry.first))
        fail(Status::Unsupported,
             "disabling adapters: ", config.tuned_module(entry.first).empty() ? "modules_to_save" : "LN tuning",
             " trains '", entry.first, "', and ", lora_.originals_dropped_because(),
             ", for a disabled forward to compute with; compute the base model's outputs from a model without it",
             sharded_at_rest_.empty() ? "" : ", or under zero_stage 1, 2 or DDP");
  // PEFT warns alike: its trained biases stay in the layers.
  if (!enabled && lora_.enabled() && config.bias != "none")
    std::fprintf(stderr,
                 "accelerate: warning: %s adapters disabled while their bias setting trains %s biases: those stay, so "
                 "the model does not compute as the base model did\n",
                 peft_method_name(config.peft_type), config.bias == "all" ? "all" : "the adapted layers'");
  lora_.set_enabled(enabled);
}

}  // namespace acc

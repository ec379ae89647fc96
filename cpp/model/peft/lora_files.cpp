#include "model/peft/lora_files.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "checkpoint/safetensors.h"
#include "checkpoint/torch_load.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "common/file_lock.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/text.h"
#include "model/peft/adalora.h"
#include "model/peft/adapter_config.h"
#include "model/peft/factor_methods.h"
#include "model/peft/ia3.h"
#include "model/peft/lora_init.h"
#include "model/peft/lycoris.h"
#include "model/peft/oft.h"
#include "model/peft/shira.h"
#include "model/peft/vera.h"

namespace acc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// PEFT writes a few kilobytes; the bound keeps a hostile file from taking gigabytes to parse.
constexpr std::uintmax_t kMaxConfigBytes = 4u << 20;
constexpr const char* kPrefix = "base_model.model.";
constexpr const char* kBaseLayerBias = ".base_layer.bias";  // an adapted layer's bias, under PEFT's bias setting
// What PEFT's lora.MultiheadAttention names its out_proj (adapted with it) in its files.
constexpr const char* kAttentionOutProj = ".base_layer.out_proj";
// What PEFT's LN tuning names its copy of a module ("<module>.ln_tuning_layers.weight").
constexpr const char* kLnTuningLayers = ".ln_tuning_layers";
// The weights' metadata names the configuration saved with them (the CRC-32C of its bytes): a
// save stopped between renaming the configuration and the weights leaves its weights `.new`, and
// they are taken only beside the configuration they were saved with. (PEFT ignores the key.)
constexpr const char* kConfigChecksumKey = "accelerate_adapter_config_crc32c";
// What saves into one folder lock (PEFT's readers ignore it).

std::string config_checksum(const std::string& text) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(text.data(), text.size()));
  return hex;
}

// Whether `weights` (a `.new` file a stopped save left) was saved with the configuration whose
// bytes are `config` (none: no configuration there).
bool saved_with(const std::string& weights, const std::optional<std::string>& config) {
  if (!config) return false;
  try {
    const Metadata metadata = load_safetensors(weights).metadata;
    const auto checksum = metadata.find(kConfigChecksumKey);
    return checksum != metadata.end() && checksum->second == config_checksum(*config);
  } catch (const Error&) {
    return false;  // not whole: not a save's
  }
}

}  // namespace

void require_lora_folder_writable(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail(Status::Io, "cannot save adapter files into '", dir, "': it is not a folder; nothing was written");
  // A folder (or another special file) in a file's place would fail the second rename, after the
  // first has replaced the configuration: refused before anything is written.
  for (const char* file : {kAdapterWeightsFile, kAdapterConfigFile})
    refuse_unless_regular((fs::path(dir) / file).string());
}

void save_lora_files(const std::string& dir, const LoraAdapters& adapters, const NamedTensors& saved) {
  require(!adapters.empty(), "the model has no LoRA adapters or trainable tokens to save");
  // Stage 3 leaves a tensor at rest an empty vector: such a save would write no values.
  auto require_whole = [](const std::string& name, const at::Tensor& t) {
    require(!(t.dim() == 1 && t.numel() == 0), "'", name,
            "' is not whole here (sharded at rest under zero_stage 3): save the adapters through the prepared "
            "model's handle (every process calls it; the main process writes)");
  };
  for (const auto& [name, tensor] : saved) require_whole(name, tensor);
  for (const auto& token : adapters.tokens().adapters()) require_whole(token.site.module, token.delta);
  NamedTensors parameters;  // the adapters' own, under their names in the model
  for (size_t k = 0; k < adapters.size(); ++k) {
    const LoraAdapter& adapter = adapters.adapters()[k];
    // Stage 3 leaves a parameter at rest an empty vector.
    const bool whole = is_ia3(adapter) ? adapter.ia3.dim() >= 2
                       : !adapter.factors.empty()
                           ? std::none_of(adapter.factors.begin(), adapter.factors.end(),
                                          [](const auto& f) { return f.second.dim() == 1 && f.second.numel() == 0; })
                           : adapter.a.dim() >= 2 && adapter.b.dim() >= 2;
    require(whole, "the adapter of '", adapter.site.module,
            "' is not whole here (sharded at rest under zero_stage 3): save the adapters "
            "through the prepared model's handle (every process calls it; the main process writes)");
    const size_t first = parameters.size();
    if (is_adalora(adapter)) {  // the entries the last pruning kept (PEFT's resize), no ranknum
      for (auto& [suffix, tensor] : adalora_saved_factors(adapter, adapters.config().adalora))
        parameters.emplace_back(adapter.site.module + suffix, std::move(tensor));
    } else {
      adapters.append_parameters(k, &parameters);
    }
    // SHiRA's places beside its values (PEFT's _get_adapter_state_dict adds them), a method's buffers.
    if (adapter.indices.defined()) parameters.emplace_back(adapter.site.module + kShiraIndices, adapter.indices);
    for (const auto& [suffix, buffer] : adapter.buffers) parameters.emplace_back(adapter.site.module + suffix, buffer);
    // An attention's out_proj adapted with it: "<attention>.out_proj.lora_A.weight" is PEFT's
    // "<attention>.base_layer.out_proj.lora_A.weight".
    const std::string& owner = adapter.site.owner;
    if (!owner.empty())
      for (size_t i = first; i < parameters.size(); ++i)
        parameters[i].first = owner + kAttentionOutProj + parameters[i].first.substr(adapter.site.module.size());
  }
  const TrainableTokens& tokens = adapters.tokens();
  for (size_t k = 0; k < tokens.adapters().size(); ++k) {
    tokens.append_parameters(k, &parameters);
    // PEFT's standalone tied layer holds its embedding's ParameterDict as its own, and its file has it
    // under both names (a clone of the one tensor).
    if (tokens.standalone())
      for (const auto& tied : tokens.adapters()[k].tied)
        parameters.emplace_back(tied.module + tokens.suffix(), tokens.adapters()[k].delta);
  }
  NamedTensors tensors;
  for (const auto& [name, tensor] : parameters)
    tensors.emplace_back(kPrefix + name, tensor.detach().to(at::kCPU).contiguous());
  for (const auto& [name, tensor] : saved) {  // an LN-tuned module's under its copy's name
    const std::string module = adapters.config().tuned_module(name);
    const std::string in_file = module.empty() ? name : module + kLnTuningLayers + name.substr(module.size());
    tensors.emplace_back(kPrefix + in_file, tensor.detach().to(at::kCPU).contiguous());
  }
  // VeRA's projections or RandLoRA's bases, under PEFT's names, where its configuration saves them
  // (RandLoRA's under each layer's name too, as PEFT's files hold them).
  const SharedTensors* shared = shared_tensors(adapters.config().peft_type);
  if (shared && adapters.config().save_projection && adapters.size() > 0) {
    const auto& projections = adapters.adapters().front().projections;
    const at::Tensor a = projections->a.detach().to(at::kCPU).contiguous(),
                     b = projections->b.detach().to(at::kCPU).contiguous();
    tensors.emplace_back(shared->file_a, a);
    tensors.emplace_back(shared->file_b, b);
    if (shared->per_layer_copies)
      for (const LoraAdapter& adapter : adapters.adapters()) {
        tensors.emplace_back(kPrefix + adapter.site.module + "." + shared->state_a, a);
        tensors.emplace_back(kPrefix + adapter.site.module + "." + shared->state_b, b);
      }
  }
  require_lora_folder_writable(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(Status::Io, "cannot create '", dir, "': ", ec.message());
  // Every process of a job may save into one folder: they take turns (each would remove the other's
  // files in progress).
  const FileLock lock((fs::path(dir) / kAdapterSaveLockFile).string(), "the adapter folder's lock file",
                      std::chrono::seconds(120));
  // Both files are written beside the old ones first, so a failed save leaves the adapter that was
  // there. Then the configuration is renamed into place, then the weights: a save stopped between
  // the two renames leaves its weights as `<weights>.new`, which read_lora_files takes while the
  // configuration is still the one they were saved with (kConfigChecksumKey). Other readers (PEFT)
  // see the new configuration with the earlier weights until the next save.
  const std::string weights = (fs::path(dir) / kAdapterWeightsFile).string(),
                    config = (fs::path(dir) / kAdapterConfigFile).string();
  const std::string new_weights = weights + ".new", new_config = config + ".new";
  // A stopped save's weights that go with the configuration there now go into place first (the
  // reader takes them already); any other leftovers of stopped saves go.
  if (fs::exists(new_weights, ec) && saved_with(new_weights, read_whole_file(config))) {
    fs::rename(new_weights, weights, ec);
    if (ec) fail(Status::Io, "cannot rename '", new_weights, "' to '", weights, "': ", ec.message());
  }
  for (const std::string& leftover : {new_weights, new_config}) fs::remove(leftover, ec);
  const std::string new_weights_name = fs::path(new_weights).filename().string();
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (is_temporary_of(entry.path().filename().string(), new_weights_name)) fs::remove(entry.path(), ec);
  const LoraConfig& config_of = adapters.config();
  const std::string config_text = adapter_config_json(config_of).dump(2) + "\n";
  try {
    write_file(new_config, config_text);
    sync_to_disk(new_config, config);  // (the weights are: write_through_temporary)
    save_safetensors(new_weights, tensors, {{"format", "pt"}, {kConfigChecksumKey, config_checksum(config_text)}});
  } catch (...) {
    fs::remove(new_weights, ec);
    fs::remove(new_config, ec);
    throw;
  }
  fs::rename(new_config, config, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(new_weights, ec);
    fs::remove(new_config, ec);
    fail(Status::Io, "cannot rename '", new_config, "' to '", config, "': ", why);
  }
  fs::rename(new_weights, weights, ec);  // where this fails, the `.new` weights stay: they are read
  if (ec) fail(Status::Io, "cannot rename '", new_weights, "' to '", weights, "': ", ec.message());
  sync_folder_of(weights, dir);
}

LoraFiles read_lora_files(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  std::string weights_path = (fs::path(dir) / kAdapterWeightsFile).string();
  refuse_unless_regular(config_path);
  std::error_code size_error;
  const std::uintmax_t size = fs::file_size(config_path, size_error);
  if (size_error) fail(Status::Io, "cannot open '", config_path, "': ", size_error.message());
  if (size > kMaxConfigBytes)
    fail(Status::Io, "'", config_path, "' holds ", size, " bytes, more than an adapter configuration's bound of ",
         kMaxConfigBytes, " (PEFT writes a few kilobytes)");
  const auto text = read_whole_file(config_path);
  if (!text) fail(Status::Io, "cannot open '", config_path, "'");
  // A save stopped between its two renames (save_lora_files): its weights are still `.new`.
  std::error_code ec;
  if (fs::exists(weights_path + ".new", ec) && saved_with(weights_path + ".new", text)) weights_path += ".new";
  LoraFiles files;
  files.config = config_from_json(parse_ordered_json_input(*text, "'" + config_path + "'", Status::Io), config_path);

  // PEFT's older saves (many adapters on the Hub) hold the weights as torch.save's pickle, which PEFT
  // reads where there is no safetensors file; so does this (without running anything it names).
  const std::string pickled = (fs::path(dir) / kAdapterPickledWeightsFile).string();
  const bool from_pickle = !fs::exists(weights_path, ec) && fs::is_regular_file(pickled, ec);
  if (from_pickle) weights_path = pickled;
  SafetensorsContents contents =
      from_pickle ? SafetensorsContents{read_torch_saved_state_dict(pickled), {}} : load_safetensors(weights_path);
  auto refuse = [&](const std::string& name, const std::string& why) {
    fail(Status::Io, "'", weights_path, "': tensor '", name, "' ", why);
  };
  // An adapter's vectors beside A and B, each present exactly where its setting says so.
  struct VectorPart {
    const char* suffix;
    bool wanted;
    const char* what;
    const char* setting;
    at::Tensor LoraFiles::Pair::*member;
  };
  const VectorPart vector_parts[] = {
      {kLoraBBiasSuffix, files.config.lora_bias, "lora_B's bias", "lora_bias", &LoraFiles::Pair::b_bias},
      {kLoraMagnitudeSuffix, files.config.use_dora, "DoRA's magnitude", "use_dora", &LoraFiles::Pair::magnitude}};
  auto take_vector_part = [&](const std::string& name, const std::string& in_model, const at::Tensor& tensor) {
    for (const VectorPart& part : vector_parts) {
      const size_t suffix = std::string(part.suffix).size();
      if (!ends_with(in_model, part.suffix) || in_model.size() <= suffix) continue;
      if (!part.wanted) refuse(name, std::string("is ") + part.what + ", but " + part.setting + " is false");
      // DoRA's magnitude of a convolution has PEFT's shape 1 x out x 1 ... (checked against lora_A below).
      const bool conv_magnitude = part.member == &LoraFiles::Pair::magnitude && tensor.dim() >= 3 &&
                                  tensor.dim() <= 5 && tensor.size(0) == 1 && tensor.numel() == tensor.size(1);
      if ((tensor.dim() != 1 && !conv_magnitude) || !tensor.is_floating_point())
        refuse(name, part.member == &LoraFiles::Pair::magnitude
                         ? "must be a 1-D floating-point tensor (a convolution's: 1 x out x 1 ...)"
                         : "must be a 1-D floating-point tensor");
      files.modules[in_model.substr(0, in_model.size() - suffix)].*part.member = tensor;
      return true;
    }
    return false;
  };
  const bool standalone = files.config.peft_type == PeftType::TrainableTokens;
  const FactorMethod* factors = factor_method(files.config.peft_type);
  const bool lycoris = files.config.peft_type == PeftType::Loha || files.config.peft_type == PeftType::Lokr;
  const bool adalora = files.config.peft_type == PeftType::Adalora, shira = files.config.peft_type == PeftType::Shira;
  const SharedTensors* shared = shared_tensors(files.config.peft_type);
  NamedTensors layer_copies;  // RandLoRA's layers' copies of its bases (PEFT loads the shared ones last)
  const char* method = peft_method_name(files.config.peft_type);
  const std::string delta_suffix = standalone ? kStandaloneTokenDeltaSuffix : kTokenDeltaSuffix;
  for (auto& [name, tensor] : contents.tensors) {
    if (shared && (name == shared->file_a || name == shared->file_b)) {  // the shared projections
      if (!files.config.save_projection) continue;  // drawn from the seed instead (PEFT warns and ignores them)
      if (!tensor.is_floating_point() || tensor.dim() != shared->dims)
        refuse(name, "must be a " + concat(shared->dims) + "-D floating-point tensor");
      (name == shared->file_a ? files.projection_a : files.projection_b) = tensor;
      continue;
    }
    if (shared && shared->per_layer_copies && name.rfind(kPrefix, 0) == 0 &&
        (ends_with(name, std::string(".") + shared->state_a) || ends_with(name, std::string(".") + shared->state_b))) {
      if (files.config.save_projection) layer_copies.emplace_back(name, tensor);
      continue;
    }
    if (name.rfind(kPrefix, 0) != 0)
      refuse(name, std::string("is not named as PEFT names adapters (") + kPrefix + "...)");
    // An embedding's adapter is PEFT's lora_embedding_A and lora_embedding_B.
    const bool embedding_a = ends_with(name, kLoraEmbeddingASuffix),
               embedding_b = ends_with(name, kLoraEmbeddingBSuffix);
    const bool is_a = ends_with(name, kLoraASuffix) || embedding_a, is_b = ends_with(name, kLoraBSuffix) || embedding_b;
    const bool embedding = embedding_a || embedding_b;
    // Trained whole: a module to save's tensor, or a bias (an adapted layer's on its base layer).
    std::string in_model = name.substr(std::string(kPrefix).size());
    if (ends_with(in_model, kBaseLayerBias)) {
      in_model = in_model.substr(0, in_model.size() - std::string(kBaseLayerBias).size()) + ".bias";
      // An attention's out_proj adapted with it: "<attention>.base_layer.out_proj.base_layer.bias".
      const std::string out_proj_bias = std::string(kAttentionOutProj) + ".bias";
      if (ends_with(in_model, out_proj_bias) && in_model.size() > out_proj_bias.size())
        in_model = in_model.substr(0, in_model.size() - out_proj_bias.size()) + ".out_proj.bias";
    }
    // PEFT's ModulesToSaveWrapper's own copies, which its bias "all" takes as biases too
    // ("<module>.original_module.bias", "<module>.modules_to_save.bias"): the module's tensors are in
    // the file under its own names.
    if (files.config.bias == "all" && ends_with(in_model, ".bias")) {
      const std::string module = in_model.substr(0, in_model.rfind('.'));
      const size_t wrapper = module.rfind('.');
      const std::string part = wrapper == std::string::npos ? "" : module.substr(wrapper + 1);
      if ((part == "original_module" || part == "modules_to_save") &&
          files.config.saves(module.substr(0, wrapper) + ".bias"))
        continue;
    }
    if (ends_with(in_model, delta_suffix) && in_model.size() > delta_suffix.size()) {
      if (!standalone && files.config.token_indices.empty())
        refuse(name, "is a trainable tokens' delta, but trainable_token_indices is not set");
      if (tensor.dim() != 2 || !tensor.is_floating_point()) refuse(name, "must be a 2-D floating-point tensor");
      files.tokens[in_model.substr(0, in_model.size() - delta_suffix.size())] = tensor;
      continue;
    }
    if (standalone) refuse(name, std::string("is not a trainable tokens' delta (<module>") + delta_suffix + ")");
    if (files.config.peft_type == PeftType::LnTuning) {  // "<module>.ln_tuning_layers.<tensor>", or a module to save's
      const size_t copy = in_model.find(std::string(kLnTuningLayers) + ".");
      if (copy != std::string::npos && copy > 0) {
        files.saved[in_model.substr(0, copy) + in_model.substr(copy + std::string(kLnTuningLayers).size())] = tensor;
        continue;
      }
      if (!files.config.saves(in_model) || !files.config.tuned_module(in_model).empty())
        refuse(name, std::string("is not a tuned module's tensor (<module>") + kLnTuningLayers +
                         ".<name>) nor what modules_to_save trains");
      files.saved[in_model] = tensor;
      continue;
    }
    if (files.config.peft_type == PeftType::Ia3) {
      const size_t suffix = std::string(kIa3Suffix).size();
      if (ends_with(in_model, kIa3Suffix) && in_model.size() > suffix) {
        // A linear layer's out x 1 or 1 x in; a convolution's 1 x channels x 1 ...
        if (!tensor.is_floating_point())
          refuse(name, "holds " + concat(tensor.scalar_type()) + " values: an IA3 vector is floating-point");
        bool shaped = tensor.dim() >= 2 && tensor.dim() <= 5 && tensor.numel() > 0 &&
                      (tensor.dim() == 2 ? tensor.size(0) == 1 || tensor.size(1) == 1
                                         : tensor.size(0) == 1 && tensor.numel() == tensor.size(1));
        if (!shaped)
          refuse(name, "has shape " + concat(tensor.sizes()) +
                           ": an IA3 vector is out x 1 or 1 x in (a convolution's 1 x channels x 1 ...)");
        files.modules[in_model.substr(0, in_model.size() - suffix)].ia3 = tensor;
        continue;
      }
      if (files.config.saves(in_model)) {
        files.saved[in_model] = tensor;
        continue;
      }
      refuse(name, "is not an IA3 vector (<module>.ia3_l) nor what modules_to_save trains");
    }
    if (shira && ends_with(in_model, kShiraIndices) && in_model.size() > std::string(kShiraIndices).size()) {
      // Checked against the layer's values and weight when loaded.
      files.modules[in_model.substr(0, in_model.size() - std::string(kShiraIndices).size())].indices = tensor;
      continue;
    }
    if (factors) {
      bool factor = false;
      if (adalora && ends_with(in_model, kAdaloraRanknum)) continue;  // (older PEFT's; always init_r)
      for (const std::string& suffix : factors->suffixes) {
        if (!ends_with(in_model, suffix) || in_model.size() <= suffix.size()) continue;
        const std::string refusal = factors->file_tensor_refusal(suffix, tensor);
        if (!refusal.empty()) refuse(name, refusal);
        files.modules[in_model.substr(0, in_model.size() - suffix.size())].factors.emplace_back(suffix, tensor);
        factor = true;
        break;
      }
      if (factor) continue;
      const bool a_bias = in_model == "bias" || ends_with(in_model, ".bias");
      if (files.config.saves(in_model) || (factors->files_hold_biases && a_bias && files.config.bias != "none")) {
        files.saved[in_model] = tensor;
        continue;
      }
      refuse(name, std::string("is not one of ") + method + "'s " + factors->tensors_word + " (<module>" +
                       factors->suffixes.front() + ", ...) nor what modules_to_save" +
                       (factors->files_hold_biases ? " or bias train" : " trains"));
    }
    if (take_vector_part(name, in_model, tensor)) continue;
    const bool a_bias = in_model == "bias" || ends_with(in_model, ".bias");
    if (!is_a && !is_b && (files.config.saves(in_model) || (a_bias && files.config.bias != "none"))) {
      files.saved[in_model] = tensor;
      continue;
    }
    if (!is_a && !is_b)
      refuse(name, "is not a lora_A or lora_B weight, DoRA's magnitude, nor what modules_to_save or bias trains");
    // The prefix's last '.' may be the suffix's first ("base_model.model.lora_A.weight"): no module then.
    const size_t prefix = std::string(kPrefix).size(),
                 suffix = std::string(embedding ? kLoraEmbeddingASuffix : kLoraASuffix).size();
    if (name.size() <= prefix + suffix) refuse(name, "names no module");
    std::string module = name.substr(prefix, name.size() - prefix - suffix), owner;
    // "<attention>.base_layer.out_proj": the attention's out_proj, adapted with it (its rank).
    const std::string out_proj = kAttentionOutProj;
    if (ends_with(module, out_proj) && module.size() > out_proj.size()) {
      owner = module.substr(0, module.size() - out_proj.size());
      module = owner + ".out_proj";
    }
    // A linear layer's adapters are matrices; a convolution's have its kernel's dimensions too (1 x ...
    // x 1 for lora_B).
    if (tensor.dim() < 2 || tensor.dim() > 5 || !tensor.is_floating_point())
      refuse(name, "must be a floating-point tensor of 2 dimensions (a linear layer's) to 5 (a convolution's)");
    if (embedding && tensor.dim() != 2) refuse(name, "must be a 2-D floating-point tensor (an embedding's adapter)");
    if (is_b)
      for (int64_t d = 2; d < tensor.dim(); ++d)
        if (tensor.size(d) != 1)
          refuse(name, "has shape " + concat(tensor.sizes()) + ": a convolution's lora_B is 1 x 1");
    const int64_t r = files.config.rank_of(owner.empty() ? module : owner);  // r, or rank_pattern's for the module
    // A grouped convolution's lora_B takes r / groups (checked against the layer when loading).
    const bool grouped_b = is_b && tensor.dim() > 2 && tensor.size(1) > 0 && r % tensor.size(1) == 0;
    // A targeted parameter's adapter takes r per expert, and its rank comes from the parameter's name:
    // checked against the model when loading (a module target_modules does not name is one).
    const bool parameter_adapter =
        !files.config.target_parameters.empty() && tensor.dim() == 2 && !embedding && !files.config.targets(module);
    if ((is_a ? tensor.size(0) : tensor.size(1)) != r && !grouped_b && !parameter_adapter)
      refuse(name, "has shape " + concat(tensor.sizes()) + ", but the adapter's rank r = " + concat(r) + " asks for " +
                       (is_a ? "[r, in_features] = [" + concat(r) + ", ...]"
                             : "[out_features, r] = [..., " + concat(r) + "]"));
    LoraFiles::Pair& pair = files.modules[module];
    if ((pair.a.defined() || pair.b.defined()) && pair.embedding != embedding)
      refuse(name, "mixes an embedding's adapter (lora_embedding_A/B) with a linear layer's (lora_A/B) for one module");
    if ((pair.a.defined() || pair.b.defined()) && pair.owner != owner)
      refuse(name, "names the out_proj '" + module + "' both as a layer of its own and as its attention's (" +
                       (owner.empty() ? pair.owner : owner) + kAttentionOutProj + ")");
    pair.embedding = embedding;
    pair.owner = owner;
    (is_a ? pair.a : pair.b) = tensor;
  }
  if (standalone) {
    if (files.tokens.empty()) fail(Status::Io, "'", weights_path, "' holds no trainable tokens");
    return files;
  }
  if (files.config.peft_type == PeftType::LnTuning) {  // (each checked against the model when loading)
    if (files.saved.empty()) fail(Status::Io, "'", weights_path, "' holds no tuned module");
    return files;
  }
  if (files.modules.empty()) fail(Status::Io, "'", weights_path, "' holds no adapter");
  if (files.config.peft_type == PeftType::Ia3) return files;
  if (factors && factors->files_hold_every_tensor) {  // (shapes checked against the layer when loading)
    for (const auto& [module, pair] : files.modules)
      for (const std::string& suffix : factors->suffixes)
        if (!find_factor(pair.factors, suffix))
          fail(Status::Io, "'", weights_path, "': the ", method, " adapter of '", module, "' lacks ", kPrefix, module,
               suffix);
  }
  if (shared) {  // and the projections where the configuration saves them
    if (files.config.save_projection && (!files.projection_a.defined() || !files.projection_b.defined()))
      fail(Status::Io, "'", weights_path, "' lacks ", method, "'s projections (", shared->file_a, ", ", shared->file_b,
           "), which save_projection says it holds");
    for (const auto& [name, copy] : layer_copies) {
      const bool of_a = ends_with(name, shared->state_a);
      const size_t prefix = std::string(kPrefix).size(),
                   state = std::string(of_a ? shared->state_a : shared->state_b).size();
      const std::string module = name.substr(prefix, name.size() - prefix - 1 - state);
      if (!files.modules.count(module))
        fail(Status::Io, "'", weights_path, "': '", name, "' is a layer's copy of ", method, "'s bases, but '", module,
             "' has no ", method, " adapter in the file");
      const at::Tensor& own = of_a ? files.projection_a : files.projection_b;
      if (copy.sizes() != own.sizes() || !copy.is_floating_point())
        fail(Status::Io, "'", weights_path, "': '", name, "' is a layer's copy of ", method, "'s bases, but ",
             copy.scalar_type(), " of shape ", copy.sizes(), " where they are ", own.sizes());
    }
    return files;
  }
  if (lycoris) {
    for (const auto& [module, pair] : files.modules) {
      std::vector<std::string> suffixes;
      for (const auto& entry : pair.factors) suffixes.push_back(entry.first);
      const std::string error = lycoris_factor_set_error(files.config.peft_type, suffixes);
      if (!error.empty())
        fail(Status::Io, "'", weights_path, "': the ", method, " adapter of '", module, "' (", kPrefix, module, ") ",
             error);
    }
    return files;
  }
  if (factors) return files;  // every tensor of every layer, checked above
  for (const auto& [module, pair] : files.modules) {
    if (!pair.a.defined() || !pair.b.defined())
      fail(Status::Io, "'", weights_path, "': the adapter of '", module, "' lacks its ",
           pair.a.defined() ? "lora_B" : "lora_A", " weight");
    if (pair.a.dim() != pair.b.dim())
      fail(Status::Io, "'", weights_path, "': the adapter of '", module, "' has a lora_A of ", pair.a.dim(),
           " dimensions and a lora_B of ", pair.b.dim());
    for (const VectorPart& part : vector_parts) {
      const at::Tensor& vector = pair.*part.member;
      if (part.wanted && !vector.defined())
        fail(Status::Io, "'", weights_path, "': the adapter of '", module, "' lacks ", part.what, " (", kPrefix, module,
             part.suffix, "), which ", part.setting, " asks for");
      if (!vector.defined()) continue;
      if (vector.numel() != pair.b.size(0))
        fail(Status::Io, "'", weights_path, "': ", part.what, " of '", module, "' has ", vector.numel(),
             " values, its lora_B ", pair.b.size(0), " outputs");
      // PEFT's shapes: a linear layer's magnitude a vector, a convolution's 1 x out x 1 ... like its weight.
      if (vector.dim() != 1 && vector.dim() != pair.a.dim())
        fail(Status::Io, "'", weights_path, "': ", part.what, " of '", module, "' has shape ", concat(vector.sizes()),
             ", its adapter lora_A ", concat(pair.a.sizes()));
      if (part.member == &LoraFiles::Pair::magnitude && pair.a.dim() > 2 && vector.dim() == 1)
        fail(Status::Io, "'", weights_path, "': ", part.what, " of '", module, "' has shape ", concat(vector.sizes()),
             ": a convolution's is 1 x out x 1 ... (PEFT's shape)");
    }
  }
  return files;
}

}  // namespace acc

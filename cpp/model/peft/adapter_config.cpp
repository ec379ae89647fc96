#include "model/peft/adapter_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "common/error.h"
#include "common/json_input.h"
#include "common/text.h"
#include "common/utf8.h"
#include "model/peft/adalora.h"
#include "model/peft/lora_init.h"
#include "model/peft/lycoris.h"
#include "model/peft/oft.h"
#include "model/peft/vera.h"

namespace acc {
namespace {

using nlohmann::json;

// A PEFT configuration's fields as its readers take them: a key missing or null is the default;
// anything else of the wrong kind or out of bounds is refused, naming the file and the key.
struct ConfigFields {
  const nlohmann::ordered_json& j;
  const std::string& path;

  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    fail(Status::Io, "'", path, "': '", key, "' ", why);
  }
  bool given(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  // A key PEFT computes with whatever it holds: null there is its TypeError, refused here.
  void refuse_null(const char* key) const {
    if (j.contains(key) && j[key].is_null()) refuse(key, "is null; PEFT computes with it (its TypeError)");
  }
  bool flag(const char* key, bool fallback) const {
    if (!given(key)) return fallback;
    if (!j[key].is_boolean()) refuse(key, "must be true or false");
    return j[key].get<bool>();
  }
  double number(const char* key, double fallback, double low, double high) const {
    if (!given(key)) return fallback;
    if (!j[key].is_number() || !(j[key].get<double>() >= low && j[key].get<double>() <= high))
      refuse(key, "must be a number in [" + concat(low) + ", " + concat(high) + "]");
    return j[key].get<double>();
  }
  int64_t integer(const char* key, int64_t fallback, int64_t low, int64_t high, const std::string& range) const {
    if (!given(key)) return fallback;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < low || j[key].get<int64_t>() > high)
      refuse(key, "must be an integer " + range);
    return j[key].get<int64_t>();
  }
  // A seed for torch.Generator.manual_seed, which takes any integer from -2^63 to 2^64 - 1 (negative
  // ones wrapped modulo 2^64): as the int64 with those bits.
  int64_t seed(const char* key, int64_t fallback) const {
    if (given(key) && j[key].is_number_unsigned()) return static_cast<int64_t>(j[key].get<uint64_t>());
    return integer(key, fallback, INT64_MIN, INT64_MAX, "from -2^63 to 2^64 - 1");
  }
};

nlohmann::ordered_json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

// The fields every PEFT configuration starts with.
nlohmann::ordered_json peft_config_json(const char* peft_type, const LoraConfig& config) {
  return {{"peft_type", peft_type},
          {"task_type", text_or_null(config.task_type)},
          {"base_model_name_or_path", text_or_null(config.base_model_name_or_path)},
          {"revision", text_or_null(config.revision)},
          {"inference_mode", true}};
}

// PEFT's target_modules: one expression (a string), or the names.
nlohmann::ordered_json targets_json(const LoraConfig& config) {
  if (config.target_regex.empty() && config.target_names.empty()) return nullptr;  // target_parameters alone
  return config.target_regex.empty() ? nlohmann::ordered_json(config.target_names)
                                     : nlohmann::ordered_json(config.target_regex);
}

// PEFT's TrainableTokensConfig: its fields, target_modules PEFT's string (an expression) holding the
// input embedding's name where none was given.
nlohmann::ordered_json tokens_config_json(const LoraConfig& config) {
  nlohmann::ordered_json j = peft_config_json(peft_type_name(PeftType::TrainableTokens), config);
  j["token_indices"] = config.standalone_indices;
  j["target_modules"] = targets_json(config);
  j["init_weights"] = config.tokens_from_weights;
  return j;
}

// PEFT's module list written as it writes one: the expression, or the names (a set, as a list).
nlohmann::ordered_json modules_json(const std::vector<std::string>& names, const std::string& regex) {
  return regex.empty() ? nlohmann::ordered_json(names) : nlohmann::ordered_json(regex);
}

// An optional list as PEFT writes it: null where it is empty.
template <typename T>
nlohmann::ordered_json list_or_null(const std::vector<T>& values) {
  return values.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(values);
}

// exclude_modules as PEFT writes it: null where none.
nlohmann::ordered_json exclude_json(const LoraConfig& config) {
  if (config.exclude_regex.empty() && config.exclude_names.empty()) return nullptr;
  return modules_json(config.exclude_names, config.exclude_regex);
}

// PEFT's IA3Config: its fields, in its order.
nlohmann::ordered_json ia3_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Ia3), config);
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["feedforward_modules"] = modules_json(config.feedforward_names, config.feedforward_regex);
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_ia3_weights"] = config.init_ia3_weights;
  return j;
}

// PEFT's patterns in the configuration's order.
void write_patterns(const LoraConfig& config, nlohmann::ordered_json* j) {
  const char* alpha = config.alpha_pattern_setting();
  (*j)["rank_pattern"] = nlohmann::ordered_json::object();
  (*j)[alpha] = nlohmann::ordered_json::object();
  for (const auto& pattern : config.rank_pattern) (*j)["rank_pattern"].emplace(pattern.key, pattern.value);
  for (const auto& pattern : config.alpha_pattern) (*j)[alpha].emplace(pattern.key, pattern.value);
}

// PEFT's VeraConfig or PveraConfig: their fields, in their order.
nlohmann::ordered_json vera_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  const bool pvera = config.peft_type == PeftType::Pvera;
  json j = peft_config_json(peft_type_name(config.peft_type), config);
  j["r"] = config.r;
  j["target_modules"] = targets_json(config);
  j["projection_prng_key"] = config.projection_prng_key;
  j["save_projection"] = config.save_projection;
  j[pvera ? "pvera_dropout" : "vera_dropout"] = config.dropout;
  j["d_initial"] = config.d_initial;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_weights"] = config.vera_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  if (pvera) {
    j["sample_at_inference"] = config.pvera_sample_at_inference;
    j["generator_seed"] = config.pvera_generator_seed ? json(*config.pvera_generator_seed) : json(nullptr);
  }
  return j;
}

// PEFT's OFTConfig: its fields, in its order.
nlohmann::ordered_json oft_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Oft), config);
  // The rotations follow PEFT 0.18's Cayley-Neumann series: PEFT reading the file without a version
  // would take it for an earlier one's and warn.
  j["peft_version"] = "0.18.0";
  j["r"] = config.oft_r;
  j["oft_block_size"] = config.oft_block_size;
  j["module_dropout"] = config.module_dropout;
  j["target_modules"] = targets_json(config);
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["bias"] = config.peft_bias();
  j["exclude_modules"] = exclude_json(config);
  j["init_weights"] = config.oft_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["coft"] = config.coft;
  j["eps"] = config.eps;
  j["block_share"] = config.block_share;
  j["use_cayley_neumann"] = config.use_cayley_neumann;
  j["num_cayley_neumann_terms"] = config.num_cayley_neumann_terms;
  return j;
}

// PEFT's LoHaConfig or LoKrConfig: its fields, in its order.
nlohmann::ordered_json lycoris_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  const bool lokr = config.peft_type == PeftType::Lokr;
  json j = peft_config_json(peft_type_name(config.peft_type), config);
  write_patterns(config, &j);
  j["r"] = config.r;
  j["alpha"] = config.alpha;
  j["rank_dropout"] = config.rank_dropout;
  j["module_dropout"] = config.module_dropout;
  j["use_effective_conv2d"] = config.use_effective_conv2d;
  if (lokr) {
    j["decompose_both"] = config.decompose_both;
    j["decompose_factor"] = config.decompose_factor;
    j["rank_dropout_scale"] = config.rank_dropout_scale;
  }
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  if (!lokr)
    j["init_weights"] = config.loha_init_weights;
  else if (config.lokr_init_weights == "lycoris")
    j["init_weights"] = "lycoris";
  else
    j["init_weights"] = config.lokr_init_weights == "true";
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// Every field PEFT's LoraConfig reads back, with the values this library implements. Keys in this
// order, rank_pattern's and alpha_pattern's in the configuration's: PEFT writes its keys sorted
// (json.dumps(sort_keys=True)), so where two keys match one module the first of its file (which
// wins) may not be the configuration's, and a PEFT adapter can load back with other ranks.
nlohmann::ordered_json config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Lora), config);
  j.update(json{{"r", config.r},
                {"lora_alpha", config.alpha},
                {"lora_dropout", config.dropout},
                {"use_rslora", config.use_rslora},
                {"fan_in_fan_out", config.fan_in_fan_out},
                {"bias", config.bias},
                {"modules_to_save", list_or_null(config.modules_to_save)},
                {"layers_to_transform", list_or_null(config.layers_to_transform)},
                {"layers_pattern", list_or_null(config.layers_pattern)},
                {"rank_pattern", json::object()},
                {"alpha_pattern", json::object()},
                {"use_dora", config.use_dora},
                {"lora_bias", config.lora_bias},
                {"ensure_weight_tying", config.ensure_weight_tying}});
  if (config.token_indices.empty()) {
    j["trainable_token_indices"] = nullptr;
  } else if (config.token_indices.size() == 1 && config.token_indices.front().first.empty()) {
    j["trainable_token_indices"] = config.token_indices.front().second;  // PEFT's list form
  } else {
    j["trainable_token_indices"] = json::object();
    for (const auto& [module, indices] : config.token_indices) j["trainable_token_indices"][module] = indices;
  }
  write_patterns(config, &j);
  if (config.init == "true" || config.init == "false")
    j["init_lora_weights"] = config.init == "true";
  else
    j["init_lora_weights"] = config.init;  // gaussian, eva, orthogonal, mica, olora, pissa, pissa_niter_<n>
  if (config.init == "eva")                // PEFT's LoraConfig sets the default EvaConfig for "eva"
    j["eva_config"] = json{{"rho", config.eva.rho},
                           {"tau", config.eva.tau},
                           {"use_label_mask", config.eva.use_label_mask},
                           {"label_mask_value", config.eva.label_mask_value},
                           {"whiten", config.eva.whiten},
                           {"adjust_scaling_factors", config.eva.adjust_scaling_factors}};
  else
    j["eva_config"] = nullptr;
  if (config.init == "corda")  // PEFT's CordaConfig with the settings this library takes
    j["corda_config"] = json{{"cache_file", nullptr},
                             {"covariance_file", nullptr},
                             {"corda_method", config.corda_method},
                             {"verbose", false},
                             {"use_float16_for_covariance", config.corda_use_float16_for_covariance},
                             {"prune_temporary_fields", true}};
  else
    j["corda_config"] = nullptr;
  // PEFT's default loftq_config is an empty dict.
  j["loftq_config"] = config.init == "loftq"
                          ? json{{"loftq_bits", config.loftq.bits}, {"loftq_iter", config.loftq.iter}}
                          : json::object();
  if (config.init == "lora_ga")
    j["lora_ga_config"] = json{{"direction", config.lora_ga.direction},
                               {"scale", config.lora_ga.scale},
                               {"stable_gamma", config.lora_ga.stable_gamma}};
  else
    j["lora_ga_config"] = nullptr;
  j["target_modules"] = targets_json(config);
  j["target_parameters"] = list_or_null(config.target_parameters);
  j["exclude_modules"] = exclude_json(config);
  return j;
}

// PEFT's AdaLoraConfig: LoraConfig's fields (its r unused, its rank_pattern AdaLoRA's pattern of
// kept entries by "<module>.lora_E", null before any pruning), then AdaLoRA's.
nlohmann::ordered_json adalora_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  LoraConfig plain = config;
  plain.rank_pattern.clear();
  plain.alpha_pattern.clear();
  plain.init = config.adalora.init_weights ? "true" : "false";
  json j = config_json(plain);
  j["peft_type"] = peft_type_name(PeftType::Adalora);
  const AdaloraConfig& a = config.adalora;
  j["target_r"] = a.target_r;
  j["init_r"] = a.init_r;
  j["tinit"] = a.tinit;
  j["tfinal"] = a.tfinal;
  j["deltaT"] = a.delta_t;
  j["beta1"] = a.beta1;
  j["beta2"] = a.beta2;
  j["orth_reg_weight"] = a.orth_reg_weight;
  j["total_step"] = a.total_step;
  if (a.rank_pattern.empty()) {
    j["rank_pattern"] = nullptr;
  } else {
    j["rank_pattern"] = json::object();
    for (const auto& [module, kept] : a.rank_pattern) j["rank_pattern"][module + kAdaloraE] = kept;
  }
  return j;
}

// PEFT's BOFTConfig: its fields, in its order.
nlohmann::ordered_json boft_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Boft), config);
  j["boft_block_size"] = config.boft_block_size;
  j["boft_block_num"] = config.boft_block_num;
  j["boft_n_butterfly_factor"] = config.boft_n_butterfly_factor;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["boft_dropout"] = config.dropout;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_weights"] = config.boft_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  return j;
}

// The base model's name and revision and the task type, kept for the next save.
void read_texts(const nlohmann::ordered_json& j, const std::string& path, LoraConfig* config) {
  auto text = [&](const char* key, std::string* out) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_string()) fail(Status::Io, "'", path, "': '", key, "' must be a string or null");
    *out = j[key].get<std::string>();
  };
  text("base_model_name_or_path", &config->base_model_name_or_path);
  text("revision", &config->revision);
  text("task_type", &config->task_type);
  const auto& types = peft_task_types();
  if (!config->task_type.empty() && std::find(types.begin(), types.end(), config->task_type) == types.end())
    fail(Status::Io, "'", path, "': 'task_type' is '", printable_utf8(config->task_type),
         "', none of PEFT's task types (SEQ_CLS, SEQ_2_SEQ_LM, CAUSAL_LM, TOKEN_CLS, QUESTION_ANS, "
         "FEATURE_EXTRACTION: PEFT's ValueError)");
}

// PEFT's loftq_config, which init_lora_weights "loftq" needs (its ValueError where it is empty).
LoftqConfig read_loftq_config(const nlohmann::ordered_json& j, const std::string& path) {
  auto refuse = [&](const std::string& why) { fail(Status::Io, "'", path, "': 'loftq_config' ", why); };
  if (!j.contains("loftq_config") || !j["loftq_config"].is_object() || j["loftq_config"].empty())
    refuse("must hold loftq_bits and loftq_iter where init_lora_weights is \"loftq\" (PEFT's LoftQConfig)");
  const auto& given = j["loftq_config"];
  auto integer = [&](const char* key, bool (*valid)(int64_t), const std::string& what) {
    if (!given.contains(key) || !given[key].is_number_integer() || !valid(given[key].get<int64_t>()))
      refuse(std::string("needs '") + key + "' " + what);
    return given[key].get<int64_t>();
  };
  LoftqConfig config;
  config.bits = integer(
      "loftq_bits", [](int64_t v) { return v == 4 || v == 8; }, "4 or 8 (PEFT's nf4 and int8)");
  config.iter = integer(
      "loftq_iter", [](int64_t v) { return v >= 1 && v <= kMaxLoftqIter; },
      "from 1 to " + std::to_string(kMaxLoftqIter));
  return config;
}

// PEFT's module lists: names, or one regular expression (a string), which must compile here.
void read_modules(const nlohmann::ordered_json& j, const std::string& path, const char* key,
                  std::vector<std::string>* names, LoraConfig* config,
                  void (LoraConfig::*set_regex)(const std::string&)) {
  const auto& value = j[key];
  if (value.is_string() && LoraConfig::is_all_linear(value.get<std::string>()) && names == &config->target_names) {
    config->all_linear = true;  // PEFT expands it as it adds the adapters (a file it wrote lists them)
  } else if (value.is_string() && !value.get<std::string>().empty()) {
    try {
      (config->*set_regex)(value.get<std::string>());
    } catch (const Error& e) {
      fail(Status::Io, "'", path, "': ", e.what());
    }
  } else if (value.is_array() && !value.empty()) {
    for (const auto& name : value) {
      if (!name.is_string() || name.get<std::string>().empty())
        fail(Status::Io, "'", path, "': '", key, "' must hold module names");
      names->push_back(name.get<std::string>());
    }
  } else {
    fail(Status::Io, "'", path, "': '", key, "' must be a regular expression or a list of module names");
  }
}

// PEFT's TrainableTokensConfig (peft_type TRAINABLE_TOKENS).
LoraConfig tokens_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  LoraConfig config;
  config.peft_type = PeftType::TrainableTokens;
  try {
    if (!j.contains("token_indices")) fail(Status::InvalidArgument, "'token_indices' is missing");
    config.set_standalone_indices(j["token_indices"]);
  } catch (const Error& e) {
    fail(Status::Io, "'", path, "': ", e.what());
  }
  // PEFT's default (null): the input embedding.
  if (j.contains("target_modules") && !j["target_modules"].is_null())
    read_modules(j, path, "target_modules", &config.target_names, &config, &LoraConfig::set_target_regex);
  if (j.contains("init_weights") && !j["init_weights"].is_null()) {
    if (!j["init_weights"].is_boolean()) fail(Status::Io, "'", path, "': 'init_weights' must be true or false");
    config.tokens_from_weights = j["init_weights"].get<bool>();
  }
  read_texts(j, path, &config);
  return config;
}

// A module exclude_modules matches gets no adapter (PEFT 0.14 and later; null, empty or absent: none).
void read_exclude_modules(const nlohmann::ordered_json& j, const std::string& path, LoraConfig* config) {
  if (j.contains("exclude_modules") && !j["exclude_modules"].is_null() && !j["exclude_modules"].empty() &&
      j["exclude_modules"] != "")
    read_modules(j, path, "exclude_modules", &config->exclude_names, config, &LoraConfig::set_exclude_regex);
}

// modules_to_save: a list of module names, or null.
void read_modules_to_save(const nlohmann::ordered_json& j, const std::string& path, LoraConfig* config) {
  if (!j.contains("modules_to_save") || j["modules_to_save"].is_null()) return;
  const auto& names = j["modules_to_save"];
  if (!names.is_array()) fail(Status::Io, "'", path, "': 'modules_to_save' must be a list of module names or null");
  for (const auto& name : names) {
    if (!name.is_string() || name.get<std::string>().empty())
      fail(Status::Io, "'", path, "': 'modules_to_save' must hold module names");
    config->modules_to_save.push_back(name.get<std::string>());
  }
}

// PEFT's IA3Config (peft_type IA3).
LoraConfig ia3_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  LoraConfig config;
  config.peft_type = PeftType::Ia3;
  const ConfigFields fields{j, path};
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.init_ia3_weights = fields.flag("init_ia3_weights", true);
  read_modules_to_save(j, path, &config);
  read_texts(j, path, &config);
  if (!j.contains("target_modules") || j["target_modules"].is_null())
    fail(Status::Io, "'", path, "': 'target_modules' is missing (PEFT fills it in for the transformers models it ",
         "knows; name the layers)");
  read_modules(j, path, "target_modules", &config.target_names, &config, &LoraConfig::set_target_regex);
  read_exclude_modules(j, path, &config);
  // Null (PEFT fills it in for the models it knows) or empty: no feedforward module.
  if (j.contains("feedforward_modules") && !j["feedforward_modules"].is_null() && !j["feedforward_modules"].empty() &&
      j["feedforward_modules"] != "")
    read_modules(j, path, "feedforward_modules", &config.feedforward_names, &config,
                 &LoraConfig::set_feedforward_regex);
  try {
    config.check_feedforward_subset();
  } catch (const Error& e) {
    fail(Status::Io, "'", path, "': ", e.what());
  }
  return config;
}

// PEFT's layers_to_transform (into `config`): a layer number or a list of them (an empty list:
// every layer); and its layers_pattern (returned): an expression or a list of them.
std::vector<std::string> read_layer_settings(const nlohmann::ordered_json& j, const std::string& path,
                                             LoraConfig* config) {
  auto refuse = [&](const char* key, const char* why) { fail(Status::Io, "'", path, "': '", key, "' ", why); };
  if (j.contains("layers_to_transform") && !j["layers_to_transform"].is_null()) {
    const auto& layers = j["layers_to_transform"];
    if (layers.is_number_integer()) {
      config->layers_to_transform.push_back(layers.get<int64_t>());
    } else {
      if (!layers.is_array()) refuse("layers_to_transform", "must be a layer number or a list of them");
      for (const auto& layer : layers) {
        if (!layer.is_number_integer()) refuse("layers_to_transform", "must hold layer numbers");
        config->layers_to_transform.push_back(layer.get<int64_t>());
      }
    }
  }
  std::vector<std::string> layer_lists;
  if (j.contains("layers_pattern") && !j["layers_pattern"].is_null()) {
    const auto& lists = j["layers_pattern"];
    if (lists.is_string()) {
      if (!lists.get<std::string>().empty()) layer_lists.push_back(lists.get<std::string>());
    } else {
      if (!lists.is_array()) refuse("layers_pattern", "must be an expression or a list of them");
      for (const auto& list : lists) {
        if (!list.is_string() || list.get<std::string>().empty()) refuse("layers_pattern", "must hold expressions");
        layer_lists.push_back(list.get<std::string>());
      }
    }
  }
  return layer_lists;
}

// The layer settings and targets a file's configuration ends with: layers_pattern compiled, and
// the settings checked together (InvalidArgument as an Io error naming the file).
void finish_layer_settings(const nlohmann::ordered_json& j, const std::string& path,
                           const std::vector<std::string>& layer_lists, LoraConfig* config) {
  try {
    config->set_layers_pattern(layer_lists);
    config->check_layer_settings(j.contains("layers_to_transform") && !j["layers_to_transform"].is_null());
  } catch (const Error& e) {
    fail(Status::Io, "'", path, "': ", e.what());
  }
}

// rank_pattern and alpha_pattern, as PEFT writes them.
void read_patterns(const nlohmann::ordered_json& j, const std::string& path, LoraConfig* config) {
  for (const char* key : {"rank_pattern", config->alpha_pattern_setting()}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    try {
      config->add_patterns(key, j[key]);
    } catch (const Error& e) {
      fail(Status::Io, "'", path, "': ", e.what());
    }
  }
}

// What LoHa's, LoKr's, OFT's and VeRA's configurations end with alike: modules_to_save, the texts,
// rank_pattern and alpha_pattern (`patterns`), the layer settings, target_modules (required) and
// exclude_modules (`exclude`: VeRA's has none).
struct SharedTail {
  bool patterns, exclude;
};
void read_shared_tail(const ConfigFields& fields, SharedTail tail, LoraConfig* config) {
  const auto& [j, path] = fields;
  read_modules_to_save(j, path, config);
  read_texts(j, path, config);
  if (tail.patterns) read_patterns(j, path, config);
  const std::vector<std::string> layer_lists = read_layer_settings(j, path, config);
  if (!fields.given("target_modules"))
    fields.refuse("target_modules",
                  "is missing (PEFT fills it in for the transformers models it knows; name the layers)");
  read_modules(j, path, "target_modules", &config->target_names, config, &LoraConfig::set_target_regex);
  if (tail.exclude) read_exclude_modules(j, path, config);
  finish_layer_settings(j, path, layer_lists, config);
}

// `bias` as PEFT reads it: none, all, or any "<method>_only" (its own, `own`, as PEFT writes it:
// the adapted layers' biases, this library's "lora_only"; PEFT's tuners take every such name alike).
void read_bias(const ConfigFields& fields, const std::string& own, LoraConfig* config) {
  fields.refuse_null("bias");  // (PEFT's bias.endswith: its AttributeError)
  if (!fields.given("bias")) return;
  const auto& bias = fields.j["bias"];
  const bool adapted_layers = bias.is_string() && ends_with(bias.get<std::string>(), "_only");
  if (bias != "none" && bias != "all" && !adapted_layers)
    fields.refuse("bias", "must be \"none\", \"all\" or \"" + own + "\" (any \"<method>_only\")");
  config->bias = adapted_layers ? "lora_only" : bias.get<std::string>();
}

// PEFT's LoHaConfig (peft_type LOHA) or LoKrConfig (LOKR).
LoraConfig lycoris_config_from_json(PeftType method, const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = method;
  config.r = fields.integer("r", 8, 1, kMaxLoraRank, "from 1 to 2^20");  // PEFT's default: 8
  // (PEFT computes with them; a null rank_dropout is no rank dropout, as PEFT's truth test takes it)
  for (const char* key : {"alpha", "module_dropout"}) fields.refuse_null(key);
  if (method == PeftType::Lokr) fields.refuse_null("decompose_factor");
  config.alpha = fields.number("alpha", 8, -kMaxLoraAlpha, kMaxLoraAlpha);  // (either sign, as PEFT)
  config.rank_dropout = fields.number("rank_dropout", 0, 0, 1);
  config.module_dropout = fields.number("module_dropout", 0, 0, 1);
  config.use_effective_conv2d = fields.flag("use_effective_conv2d", false);
  if (method == PeftType::Loha) {
    config.loha_init_weights = fields.flag("init_weights", true);
  } else {
    config.decompose_both = fields.flag("decompose_both", false);
    config.rank_dropout_scale = fields.flag("rank_dropout_scale", false);
    config.decompose_factor =
        fields.integer("decompose_factor", -1, -(1LL << 31), 1LL << 31, "(-1: near the square root)");
    if (j.contains("init_weights") && j["init_weights"].is_string()) {  // PEFT: "lycoris", else its truth
      const std::string init = j["init_weights"].get<std::string>();
      config.lokr_init_weights = init == "lycoris" ? "lycoris" : init.empty() ? "false" : "true";
    } else {
      config.lokr_init_weights = fields.flag("init_weights", true) ? "true" : "false";
    }
  }
  read_shared_tail(fields, {/*patterns=*/true, /*exclude=*/true}, &config);
  return config;
}

// PEFT's OFTConfig (peft_type OFT).
LoraConfig oft_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Oft;
  // PEFT refuses a file from before 0.14 (no oft_block_size), whose weights are laid out otherwise.
  if (!j.contains("oft_block_size"))
    fields.refuse("oft_block_size",
                  "is missing: the adapter comes from PEFT before 0.14, whose OFT weights are laid "
                  "out otherwise (PEFT refuses it too)");
  for (const char* key : {"r", "oft_block_size", "module_dropout"}) fields.refuse_null(key);  // (computed with)
  config.oft_r = fields.integer("r", 0, 0, kMaxLoraRank, "from 0 to 2^20");
  config.oft_block_size = fields.integer("oft_block_size", 32, 0, kMaxLoraRank, "from 0 to 2^20");
  if ((config.oft_r != 0) == (config.oft_block_size != 0))
    fields.refuse("r", "and 'oft_block_size' must be one 0 and the other not (PEFT's OFTConfig check)");
  config.module_dropout = fields.number("module_dropout", 0, 0, 1);
  config.coft = fields.flag("coft", false);
  config.eps = fields.number("eps", 6e-5, 0, kMaxLoraAlpha);
  config.block_share = fields.flag("block_share", false);
  config.use_cayley_neumann = fields.flag("use_cayley_neumann", true);
  config.num_cayley_neumann_terms = fields.integer("num_cayley_neumann_terms", 5, 1, 64, "from 1 to 64");
  // PEFT before 0.18 summed another Cayley-Neumann series (its last term doubled); such weights
  // would rotate otherwise here (PEFT itself warns). PEFT wrote peft_version from 0.18 on: a file
  // without one is older, as PEFT takes it.
  if (fields.given("peft_version") && !j["peft_version"].is_string())
    fields.refuse("peft_version", "must be a version string (\"0.18.0\")");
  if (config.use_cayley_neumann) {
    const std::string version = fields.given("peft_version") ? j["peft_version"].get<std::string>() : "";
    int major = 0, minor = 0;
    const bool parsed = std::sscanf(version.c_str(), "%d.%d", &major, &minor) == 2;
    if (!parsed || (major == 0 && minor < 18))
      fail(Status::Unsupported, "'", path, "': OFT adapters ",
           version.empty() ? std::string("without a peft_version (PEFT wrote none before 0.18)")
           : parsed        ? "of PEFT " + version
                           : "of the unreadable peft_version '" + version + "'",
           " with use_cayley_neumann use PEFT's earlier Cayley-Neumann series (0.18 changed it), which is not ",
           "built; retrain with PEFT 0.18 or later, or with use_cayley_neumann false");
  }
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);
  config.oft_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "oft_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// VeRA's and RandLoRA's projection_prng_key and save_projection.
void read_projection_settings(const ConfigFields& fields, LoraConfig* config) {
  fields.refuse_null("projection_prng_key");  // (PEFT seeds a generator with it)
  config->projection_prng_key = fields.seed("projection_prng_key", config->projection_prng_key);
  // Absent: PEFT's default, true; null: false, as PEFT's truth test takes it.
  config->save_projection = fields.j.contains("save_projection") && fields.j["save_projection"].is_null()
                                ? false
                                : fields.flag("save_projection", true);
}

// PEFT's VeraConfig (peft_type VERA) or PveraConfig (PVERA).
LoraConfig vera_config_from_json(const nlohmann::ordered_json& j, const std::string& path, PeftType type) {
  const ConfigFields fields{j, path};
  const bool pvera = type == PeftType::Pvera;
  LoraConfig config;
  config.peft_type = type;
  config.r = fields.integer("r", 256, 1, kMaxLoraRank, "from 1 to 2^20");  // PEFT's default: 256
  read_projection_settings(fields, &config);
  config.dropout = fields.number(pvera ? "pvera_dropout" : "vera_dropout", 0, 0, 1);
  config.d_initial = fields.number("d_initial", 0.1, -kMaxLoraAlpha, kMaxLoraAlpha);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.vera_init_weights = fields.flag("init_weights", true);
  read_bias(fields, pvera ? "pvera_only" : "vera_only", &config);
  if (pvera) {
    config.pvera_sample_at_inference = fields.flag("sample_at_inference", false);
    if (fields.given("generator_seed")) config.pvera_generator_seed = fields.seed("generator_seed", 0);  // (null: none)
  }
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);
  return config;
}

// PEFT's AdaLoraConfig (peft_type ADALORA): LoraConfig's fields that AdaLoRA uses, its own, and
// its rank_pattern, keyed "<module>.lora_E" (or with the adapter's name after it, as PEFT's
// allocator names them before a save), each a list of init_r flags.
LoraConfig adalora_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Adalora;
  AdaloraConfig& a = config.adalora;
  // (PEFT's config check, its layers and its rank allocator compute with them)
  for (const char* key : {"init_r", "target_r", "tinit", "tfinal", "deltaT", "beta1", "beta2", "orth_reg_weight",
                          "lora_alpha", "lora_dropout"})
    fields.refuse_null(key);
  a.init_r = fields.integer("init_r", 12, 1, kMaxLoraRank, "from 1 to 2^20");
  a.target_r = fields.integer("target_r", 8, 0, kMaxLoraRank, "from 0 to 2^20");
  a.tinit = fields.integer("tinit", 0, 0, kMaxAdaloraSteps, "from 0 to 2^53");
  a.tfinal = fields.integer("tfinal", 0, 0, kMaxAdaloraSteps, "from 0 to 2^53");
  a.delta_t = fields.integer("deltaT", 1, 1, kMaxAdaloraSteps, "from 1 to 2^53");
  a.beta1 = fields.number("beta1", 0.85, 0, 1);
  a.beta2 = fields.number("beta2", 0.85, 0, 1);
  a.orth_reg_weight = fields.number("orth_reg_weight", 0.5, 0, kMaxLoraAlpha);
  a.total_step = fields.integer("total_step", 0, 0, kMaxAdaloraSteps, "from 1 to 2^53 (required)");
  try {
    check_adalora_schedule(a);
  } catch (const Error& e) {
    fail(Status::Io, "'", path, "': ", e.what());
  }
  config.alpha = fields.number("lora_alpha", 8, -kMaxLoraAlpha, kMaxLoraAlpha);  // (not above 0: the rank)
  config.dropout = fields.number("lora_dropout", 0, 0, 1);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  // PEFT's update_layer tests init_lora_weights' truth: a string (gaussian, ...) is true.
  a.init_weights = fields.given("init_lora_weights") && fields.j["init_lora_weights"].is_string()
                       ? !fields.j["init_lora_weights"].get<std::string>().empty()
                       : fields.flag("init_lora_weights", true);
  // PEFT's AdaLoraConfig refuses DoRA and LoftQ; its layers ignore use_rslora and lora_bias.
  if (fields.flag("use_dora", false)) fields.refuse("use_dora", "is true: PEFT's AdaLoRA does not support DoRA");
  if (fields.given("loftq_config") && !(j["loftq_config"].is_object() && j["loftq_config"].empty()))
    fields.refuse("loftq_config", "is set: PEFT's AdaLoRA does not support LoftQ");
  (void)fields.flag("use_rslora", false), (void)fields.flag("lora_bias", false);
  read_bias(fields, "lora_only", &config);
  if (fields.given("rank_pattern")) {
    const auto& pattern = j["rank_pattern"];
    if (!pattern.is_object()) fields.refuse("rank_pattern", "must be an object from \"<module>.lora_E\" to flags");
    const std::string suffix = kAdaloraE;
    for (const auto& [key, flags] : pattern.items()) {
      std::string module = key;
      if (ends_with(module, suffix + ".default")) module.resize(module.size() - std::string(".default").size());
      if (!ends_with(module, suffix) || module.size() <= suffix.size())
        fields.refuse("rank_pattern", "has the key '" + key + "', which is not \"<module>.lora_E\"");
      module.resize(module.size() - suffix.size());
      if (!flags.is_array() || static_cast<int64_t>(flags.size()) != a.init_r)
        fields.refuse("rank_pattern",
                      "'s entry '" + key + "' must be a list of init_r = " + concat(a.init_r) + " flags");
      std::vector<bool> kept;
      for (const auto& flag : flags) {
        if (!flag.is_boolean()) fields.refuse("rank_pattern", "'s entry '" + key + "' must hold true or false");
        kept.push_back(flag.get<bool>());
      }
      if (config.adalora.kept(module)) fields.refuse("rank_pattern", "names '" + module + "' twice");
      a.rank_pattern.emplace_back(module, std::move(kept));
    }
    a.held = a.rank_pattern;  // the file's tensors hold the kept entries only
  }
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// PEFT's BOFTConfig (peft_type BOFT).
LoraConfig boft_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Boft;
  for (const char* key : {"boft_block_size", "boft_block_num", "boft_dropout"})
    fields.refuse_null(key);  // (computed with)
  config.boft_block_size = fields.integer("boft_block_size", 4, 0, kMaxLoraRank, "from 0 to 2^20");
  config.boft_block_num = fields.integer("boft_block_num", 0, 0, kMaxLoraRank, "from 0 to 2^20");
  if ((config.boft_block_size != 0) == (config.boft_block_num != 0))
    fields.refuse("boft_block_size", "and 'boft_block_num' must be one 0 and the other not (PEFT's BOFTConfig check)");
  config.boft_n_butterfly_factor = fields.integer("boft_n_butterfly_factor", 1, 1, 30, "from 1 to 30");
  config.dropout = fields.number("boft_dropout", 0, 0, 1);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);
  config.boft_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "boft_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// PEFT's HRAConfig: its fields, in its order.
nlohmann::ordered_json hra_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Hra), config);
  j["r"] = config.r;
  j["apply_GS"] = config.hra_apply_gs;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["init_weights"] = config.hra_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// PEFT's HRAConfig (peft_type HRA).
LoraConfig hra_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Hra;
  config.r = fields.integer("r", 8, 1, kMaxLoraRank, "from 1 to 2^20");
  config.hra_apply_gs = fields.flag("apply_GS", false);
  config.hra_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "hra_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// FourierFT's n_frequency_pattern or C3A's block_size_pattern, as PEFT writes it (an object).
nlohmann::ordered_json size_pattern_json(const LoraConfig& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& pattern : config.size_pattern) j[pattern.key] = pattern.value;
  return j;
}

// The method's size pattern (size_pattern_setting) from its file, checked as the option is.
void read_size_pattern(const ConfigFields& fields, LoraConfig* config) {
  const char* setting = config->size_pattern_setting();
  if (!fields.given(setting)) return;
  const auto& pattern = fields.j[setting];
  if (!pattern.is_object()) fields.refuse(setting, "must be an object from module names to sizes");
  for (const auto& [key, value] : pattern.items()) {
    if (!value.is_number_integer()) fields.refuse(setting, "'s '" + key + "' must be an integer");
    try {
      config->add_size_pattern(key, size_value(value, setting, key));
    } catch (const Error& e) {
      fail(Status::Io, "'", fields.path, "': ", e.what());
    }
  }
}

// PEFT's FourierFTConfig: its fields, in its order.
nlohmann::ordered_json fourierft_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Fourierft), config);
  j["n_frequency"] = config.n_frequency;
  j["scaling"] = config.fourier_scaling;
  j["random_loc_seed"] = config.random_loc_seed;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["n_frequency_pattern"] = size_pattern_json(config);
  j["init_weights"] = config.fourier_init_weights;
  return j;
}

// PEFT's FourierFTConfig (peft_type FOURIERFT).
LoraConfig fourierft_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Fourierft;
  // (PEFT computes with these: a null is its TypeError)
  for (const char* key : {"n_frequency", "scaling", "n_frequency_pattern"}) fields.refuse_null(key);
  config.n_frequency = fields.integer("n_frequency", 1000, 1, kMaxFrequencies, "from 1 to 2^31");
  config.fourier_scaling = fields.number("scaling", 150.0, -kMaxLoraAlpha, kMaxLoraAlpha);
  fields.refuse_null("random_loc_seed");  // (PEFT seeds a generator with it)
  config.random_loc_seed = fields.seed("random_loc_seed", 777);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.fourier_init_weights = fields.flag("init_weights", false);
  read_bias(fields, "fourier_only", &config);
  read_size_pattern(fields, &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// An init_weights that is a bool or the name of a variant ("true"/"false" kept as text), as PEFT
// writes it: the bool as a bool.
nlohmann::ordered_json init_variant_json(const std::string& init) {
  if (init == "true" || init == "false") return init == "true";
  return init;
}

// init_weights read into `init` where given: a bool ("true"/"false") or one of `names`; anything
// else refused, saying it must be `expected`.
void read_init_variant(const ConfigFields& fields, std::initializer_list<const char*> names, const char* expected,
                       std::string* init) {
  if (!fields.given("init_weights")) return;
  const auto& value = fields.j["init_weights"];
  if (value.is_boolean()) {
    *init = value.get<bool>() ? "true" : "false";
    return;
  }
  for (const char* name : names)
    if (value == name) {
      *init = name;
      return;
    }
  fields.refuse("init_weights", std::string("must be ") + expected);
}

// PEFT's MissConfig: its fields, in its order (init_weights a bool, or "bat" or "mini").
nlohmann::ordered_json miss_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Miss), config);
  j["r"] = config.r;
  j["miss_dropout"] = config.dropout;
  j["mini_r"] = config.miss_mini_r;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["init_weights"] = init_variant_json(config.miss_init);
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// PEFT's MissConfig (peft_type MISS).
LoraConfig miss_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Miss;
  for (const char* key : {"r", "mini_r", "miss_dropout"}) fields.refuse_null(key);  // (PEFT computes with them)
  config.r = fields.integer("r", 64, 1, kMaxLoraRank, "from 1 to 2^20");            // PEFT's default: 64
  config.miss_mini_r = fields.integer("mini_r", 1, 1, kMaxLoraRank, "from 1 to 2^20");
  config.dropout = fields.number("miss_dropout", 0, 0, 1);
  if (j.contains("init_weights") && j["init_weights"].is_null())
    config.miss_init = "false";  // (PEFT's truth test: the Kaiming draws)
  else
    read_init_variant(fields, {"bat", "mini"}, "true, false, \"bat\" or \"mini\" (MiSS's variants)", &config.miss_init);
  read_bias(fields, "MiSS_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// PEFT's C3AConfig: its fields, in its order (init_weights a bool where it is one).
nlohmann::ordered_json c3a_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::C3a), config);
  j["block_size"] = config.c3a_block_size;
  j["target_modules"] = targets_json(config);
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["block_size_pattern"] = size_pattern_json(config);
  j["init_weights"] = init_variant_json(config.c3a_init);
  return j;
}

// PEFT's C3AConfig (peft_type C3A).
LoraConfig c3a_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::C3a;
  for (const char* key : {"block_size", "block_size_pattern"}) fields.refuse_null(key);  // (PEFT computes with them)
  config.c3a_block_size = fields.integer("block_size", 256, 1, kMaxLoraRank, "from 1 to 2^20");
  fields.refuse_null("init_weights");  // (PEFT's reset_c3a_parameters: its ValueError)
  read_init_variant(fields, {"xavier_uniform", "kaiming_uniform", "gaussian"},
                    "true, false, \"xavier_uniform\", \"kaiming_uniform\" or \"gaussian\"", &config.c3a_init);
  read_bias(fields, "c3a_only", &config);
  read_size_pattern(fields, &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);  // (PEFT ignores one)
  return config;
}

// PEFT's DeloraConfig: its fields, in its order (lambda_pattern is alpha_pattern here).
nlohmann::ordered_json delora_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Delora), config);
  j["r"] = config.r;
  j["delora_lambda"] = config.alpha;
  j["module_dropout"] = config.dropout;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["bias"] = config.peft_bias();
  j["init_weights"] = config.delora_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  write_patterns(config, &j);
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// PEFT's DeloraConfig (peft_type DELORA).
LoraConfig delora_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Delora;
  for (const char* key : {"r", "delora_lambda", "module_dropout"}) fields.refuse_null(key);  // (computed with)
  config.r = fields.integer("r", 8, 1, kMaxLoraRank, "from 1 to 2^20");                      // PEFT's default: 8
  config.alpha = fields.number("delora_lambda", 15, -kMaxLoraAlpha, kMaxLoraAlpha);          // (either sign, as PEFT)
  config.dropout = fields.number("module_dropout", 0, 0, 1);
  config.delora_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "delora_only", &config);
  read_shared_tail(fields, {/*patterns=*/true, /*exclude=*/true}, &config);
  return config;
}

// PEFT's RandLoraConfig: its fields, in its order.
nlohmann::ordered_json randlora_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Randlora), config);
  j["r"] = config.r;
  j["target_modules"] = targets_json(config);
  j["projection_prng_key"] = config.projection_prng_key;
  j["save_projection"] = config.save_projection;
  j["sparse"] = config.randlora_sparse;
  j["very_sparse"] = config.randlora_very_sparse;
  j["randlora_dropout"] = config.dropout;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["randlora_alpha"] = config.randlora_alpha;
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_weights"] = config.randlora_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  return j;
}

// PEFT's RandLoraConfig (peft_type RANDLORA).
LoraConfig randlora_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Randlora;
  for (const char* key : {"r", "randlora_alpha", "randlora_dropout"}) fields.refuse_null(key);  // (computed with)
  config.r = fields.integer("r", 32, 1, kMaxLoraRank, "from 1 to 2^20");                        // PEFT's default: 32
  read_projection_settings(fields, &config);
  config.randlora_sparse = fields.flag("sparse", false);
  config.randlora_very_sparse = fields.flag("very_sparse", false);
  config.dropout = fields.number("randlora_dropout", 0, 0, 1);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.randlora_alpha = fields.number("randlora_alpha", 640, -kMaxLoraAlpha, kMaxLoraAlpha);
  config.randlora_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "randlora_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);  // (PEFT's has no exclude_modules)
  return config;
}

// PEFT's ShiraConfig: its fields, in its order.
nlohmann::ordered_json shira_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Shira), config);
  j["r"] = config.r;
  j["mask_type"] = config.shira_mask_type;
  j["random_seed"] = config.shira_random_seed ? json(*config.shira_random_seed) : json(nullptr);
  j["target_modules"] = targets_json(config);
  j["fan_in_fan_out"] = false;
  j["init_weights"] = config.shira_init_weights;
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// `j` without the layer settings and exclude_modules, for a method's configuration that has none of
// them (ShiraConfig, RoadConfig): a file's are ignored, as PEFT drops keys its class lacks.
nlohmann::ordered_json without_layer_settings(const nlohmann::ordered_json& j) {
  nlohmann::ordered_json own = j;
  for (const char* key : {"layers_to_transform", "layers_pattern", "exclude_modules"}) own.erase(key);
  return own;
}

// PEFT's ShiraConfig (peft_type SHIRA). Its mask_type may name a function of the user's (PEFT's
// mask_fn, Python code): the places then come from the file's shira_indices alone.
LoraConfig shira_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const nlohmann::ordered_json own = without_layer_settings(j);
  const ConfigFields fields{own, path};
  LoraConfig config;
  config.peft_type = PeftType::Shira;
  fields.refuse_null("r");  // (PEFT computes with it)
  config.r = fields.integer("r", 32, 1, kMaxLoraRank, "from 1 to 2^20");
  fields.refuse_null("mask_type");
  if (fields.given("mask_type")) {
    if (!own["mask_type"].is_string() || own["mask_type"].get<std::string>().empty() ||
        !is_utf8(own["mask_type"].get<std::string>()))
      fields.refuse("mask_type", "must be a name (\"random\", or the user's own mask function's)");
    config.shira_mask_type = own["mask_type"].get<std::string>();
  }
  if (fields.given("random_seed")) config.shira_random_seed = fields.seed("random_seed", 0);  // (null: none)
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.shira_init_weights = fields.flag("init_weights", true);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);
  return config;
}

// PEFT's RoadConfig: its fields, in its order.
nlohmann::ordered_json road_config_json(const LoraConfig& config) {
  nlohmann::ordered_json j = peft_config_json(peft_type_name(PeftType::Road), config);
  j["variant"] = config.road_variant;
  j["group_size"] = config.road_group_size;
  j["init_weights"] = config.road_init_weights;
  j["target_modules"] = targets_json(config);
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// PEFT's RoadConfig (peft_type ROAD), refused where its __post_init__ refuses it.
LoraConfig road_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const nlohmann::ordered_json own = without_layer_settings(j);
  const ConfigFields fields{own, path};
  LoraConfig config;
  config.peft_type = PeftType::Road;
  if (own.contains("variant")) {
    const auto& variant = own["variant"];
    if (!variant.is_string() || (variant != "road_1" && variant != "road_2" && variant != "road_4"))
      fields.refuse("variant", "must be \"road_1\", \"road_2\" or \"road_4\"");
    config.road_variant = variant.get<std::string>();
  }
  fields.refuse_null("group_size");
  config.road_group_size = fields.integer("group_size", 64, 2, kMaxLoraRank, "from 2 to 2^20");
  if (config.road_group_size % 2 != 0) fields.refuse("group_size", "must be even (its halves pair up)");
  config.road_init_weights = fields.flag("init_weights", true);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);
  return config;
}

// PEFT's GraloraConfig: its fields, in its order (alpha an integer where it is one, as PEFT's int).
nlohmann::ordered_json gralora_config_json(const LoraConfig& config) {
  using json = nlohmann::ordered_json;
  json j = peft_config_json(peft_type_name(PeftType::Gralora), config);
  j["r"] = config.r;
  j["hybrid_r"] = config.gralora_hybrid_r;
  j["target_modules"] = targets_json(config);
  const bool whole = config.alpha == std::floor(config.alpha) && std::abs(config.alpha) < 9.0e15;
  j["alpha"] = whole ? json(static_cast<int64_t>(config.alpha)) : json(config.alpha);
  j["gralora_dropout"] = config.dropout;
  j["gralora_k"] = config.gralora_k;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["bias"] = config.peft_bias();
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_weights"] = config.gralora_init_weights;
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  return j;
}

// PEFT's GraloraConfig (peft_type GRALORA), refused where its __post_init__ and update_layer refuse it.
LoraConfig gralora_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Gralora;
  // (PEFT computes with these: a null is its TypeError)
  for (const char* key : {"r", "hybrid_r", "alpha", "gralora_dropout", "gralora_k"}) fields.refuse_null(key);
  config.r = fields.integer("r", 32, 1, kMaxLoraRank, "from 1 to 2^20");
  config.gralora_hybrid_r = fields.integer("hybrid_r", 0, 0, kMaxLoraRank, "from 0 to 2^20");
  config.alpha = fields.number("alpha", 64, -kMaxLoraAlpha, kMaxLoraAlpha);
  config.gralora_alpha = config.alpha;
  config.dropout = fields.number("gralora_dropout", 0, 0, 1);
  config.gralora_k = fields.integer("gralora_k", 2, 1, kMaxLoraRank, "from 1 to 2^20");
  if (config.r % config.gralora_k != 0) fields.refuse("gralora_k", "must divide r (each block's rank is r / k)");
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  config.gralora_init_weights = fields.flag("init_weights", true);
  read_bias(fields, "gralora_only", &config);
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/false}, &config);
  return config;
}

// PEFT's HiraConfig: its fields, in its order (init_weights a bool, or "gaussian").
nlohmann::ordered_json hira_config_json(const LoraConfig& config) {
  nlohmann::ordered_json j = peft_config_json(peft_type_name(PeftType::Hira), config);
  j["r"] = config.r;
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["hira_dropout"] = config.dropout;
  j["fan_in_fan_out"] = config.fan_in_fan_out;
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  j["init_weights"] = init_variant_json(config.hira_init);
  j["layers_to_transform"] = list_or_null(config.layers_to_transform);
  j["layers_pattern"] = list_or_null(config.layers_pattern);
  j["rank_pattern"] = nlohmann::ordered_json::object();
  for (const auto& pattern : config.rank_pattern) j["rank_pattern"].emplace(pattern.key, pattern.value);
  return j;
}

// PEFT's HiraConfig (peft_type HIRA).
LoraConfig hira_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::Hira;
  for (const char* key : {"r", "hira_dropout"}) fields.refuse_null(key);  // (PEFT computes with them)
  config.r = fields.integer("r", 32, 1, kMaxLoraRank, "from 1 to 2^20");  // PEFT's default: 32
  config.dropout = fields.number("hira_dropout", 0, 0, 1);
  config.fan_in_fan_out = fields.flag("fan_in_fan_out", false);  // each layer's kind decides, as in PEFT
  if (j.contains("init_weights") && j["init_weights"].is_null())
    config.hira_init = "false";  // (PEFT's truth test: the randn draws kept)
  else if (j.contains("init_weights") && j["init_weights"].is_string() &&
           lowercase(j["init_weights"].get<std::string>()) == "gaussian")
    config.hira_init = "gaussian";  // (PEFT's init_weights.lower())
  else
    read_init_variant(fields, {"gaussian"}, "true, false or \"gaussian\" (HiRA's starts)", &config.hira_init);
  read_shared_tail(fields, {/*patterns=*/true, /*exclude=*/true}, &config);
  return config;
}

}  // namespace

// PEFT's LNTuningConfig: its fields, in its order.
nlohmann::ordered_json ln_tuning_config_json(const LoraConfig& config) {
  nlohmann::ordered_json j = peft_config_json(peft_type_name(PeftType::LnTuning), config);
  j["target_modules"] = targets_json(config);
  j["exclude_modules"] = exclude_json(config);
  j["modules_to_save"] = list_or_null(config.modules_to_save);
  return j;
}

// PEFT's LNTuningConfig (peft_type LN_TUNING).
LoraConfig ln_tuning_config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  const ConfigFields fields{j, path};
  LoraConfig config;
  config.peft_type = PeftType::LnTuning;
  read_shared_tail(fields, {/*patterns=*/false, /*exclude=*/true}, &config);
  return config;
}

// adapter_config.json for the method's configuration, as PEFT writes it.
nlohmann::ordered_json adapter_config_json(const LoraConfig& config) {
  switch (config.peft_type) {
    case PeftType::TrainableTokens:
      return tokens_config_json(config);
    case PeftType::Ia3:
      return ia3_config_json(config);
    case PeftType::Loha:
    case PeftType::Lokr:
      return lycoris_config_json(config);
    case PeftType::Vera:
    case PeftType::Pvera:
      return vera_config_json(config);
    case PeftType::Oft:
      return oft_config_json(config);
    case PeftType::Adalora:
      return adalora_config_json(config);
    case PeftType::Boft:
      return boft_config_json(config);
    case PeftType::Hra:
      return hra_config_json(config);
    case PeftType::Fourierft:
      return fourierft_config_json(config);
    case PeftType::LnTuning:
      return ln_tuning_config_json(config);
    case PeftType::Miss:
      return miss_config_json(config);
    case PeftType::C3a:
      return c3a_config_json(config);
    case PeftType::Shira:
      return shira_config_json(config);
    case PeftType::Randlora:
      return randlora_config_json(config);
    case PeftType::Delora:
      return delora_config_json(config);
    case PeftType::Road:
      return road_config_json(config);
    case PeftType::Gralora:
      return gralora_config_json(config);
    case PeftType::Hira:
      return hira_config_json(config);
    case PeftType::Lora:
      break;
  }
  return config_json(config);
}

// Read with each object's keys in the file's order: rank_pattern's first matching key wins.
LoraConfig config_from_json(const nlohmann::ordered_json& j, const std::string& path) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    fail(Status::Io, "'", path, "': '", key, "' ", why);
  };
  if (!j.is_object()) fail(Status::Io, "'", path, "' is not a JSON object");
  if (j.contains("peft_type") && j["peft_type"] == "TRAINABLE_TOKENS") return tokens_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "IA3") return ia3_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "LOHA") return lycoris_config_from_json(PeftType::Loha, j, path);
  if (j.contains("peft_type") && j["peft_type"] == "LOKR") return lycoris_config_from_json(PeftType::Lokr, j, path);
  if (j.contains("peft_type") && j["peft_type"] == "VERA") return vera_config_from_json(j, path, PeftType::Vera);
  if (j.contains("peft_type") && j["peft_type"] == "PVERA") return vera_config_from_json(j, path, PeftType::Pvera);
  if (j.contains("peft_type") && j["peft_type"] == "OFT") return oft_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "ADALORA") return adalora_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "BOFT") return boft_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "HRA") return hra_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "FOURIERFT") return fourierft_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "LN_TUNING") return ln_tuning_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "MISS") return miss_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "C3A") return c3a_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "SHIRA") return shira_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "RANDLORA") return randlora_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "DELORA") return delora_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "ROAD") return road_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "GRALORA") return gralora_config_from_json(j, path);
  if (j.contains("peft_type") && j["peft_type"] == "HIRA") return hira_config_from_json(j, path);
  // PEFT's other methods: a valid adapter folder this library does not read (a feature not built).
  static const std::set<std::string> not_built = {"PROMPT_TUNING", "MULTITASK_PROMPT_TUNING",
                                                  "P_TUNING",      "PREFIX_TUNING",
                                                  "ADAMSS",        "ADAPTION_PROMPT",
                                                  "BEFT",          "LILY",
                                                  "POLY",          "FROD",
                                                  "GLORA",         "XLORA",
                                                  "VBLORA",        "UNILORA",
                                                  "CPT",           "WAVEFT",
                                                  "OSF",           "CARTRIDGE",
                                                  "TINYLORA",      "PSOFT",
                                                  "PEANUT",        "SUPERTUNING",
                                                  "DEFT",          "BONE"};
  if (j.contains("peft_type") && j["peft_type"].is_string() && not_built.count(j["peft_type"].get<std::string>()))
    fail(Status::Unsupported, "'", path, "': PEFT's ", j["peft_type"].get<std::string>(),
         " adapters are not built here (LORA, IA3, LOHA, LOKR, VERA, PVERA, OFT, ADALORA, BOFT, HRA, FOURIERFT, ",
         "LN_TUNING, MISS, C3A, SHIRA, RANDLORA, DELORA, ROAD, GRALORA, HIRA and TRAINABLE_TOKENS are)");
  if (!j.contains("peft_type") || j["peft_type"] != "LORA")
    refuse(
        "peft_type",
        "must be \"LORA\", \"IA3\", \"LOHA\", \"LOKR\", \"VERA\", \"PVERA\", \"OFT\", \"ADALORA\", \"BOFT\", \"HRA\", "
        "\"FOURIERFT\", \"LN_TUNING\", \"MISS\", \"C3A\", \"SHIRA\", \"RANDLORA\", \"DELORA\", "
        "\"ROAD\", \"GRALORA\", \"HIRA\" or \"TRAINABLE_TOKENS\" (other PEFT methods are not supported)");
  LoraConfig config;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1 || j["r"].get<int64_t>() > (1 << 20))
    refuse("r", "must be an integer from 1 to 2^20");
  config.r = j["r"].get<int64_t>();
  // PEFT's defaults where a field is absent (older files lack the newer ones).
  auto number = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number() || !std::isfinite(j[key].get<double>())) refuse(key, "must be a finite number");
    return j[key].get<double>();
  };
  config.alpha = number("lora_alpha", 8);
  if (std::abs(config.alpha) > kMaxLoraAlpha)  // as the option lora_alpha (either sign, as PEFT)
    refuse("lora_alpha", "must be in [" + concat(-kMaxLoraAlpha) + ", " + concat(kMaxLoraAlpha) + "]");
  config.dropout = number("lora_dropout", 0);
  if (config.dropout < 0 || config.dropout > 1) refuse("lora_dropout", "must be in [0, 1]");  // (torch's Dropout's)
  auto flag = [&](const char* key) {
    if (!j.contains(key) || j[key].is_null()) return false;
    if (!j[key].is_boolean()) refuse(key, "must be true or false");
    return j[key].get<bool>();
  };
  config.use_rslora = flag("use_rslora");
  config.use_dora = flag("use_dora");
  config.fan_in_fan_out = flag("fan_in_fan_out");  // each layer's kind decides, as in PEFT
  read_bias(ConfigFields{j, path}, "lora_only", &config);
  config.lora_bias = flag("lora_bias");
  if (config.lora_bias && config.use_dora) refuse("lora_bias", "is true with use_dora, which PEFT does not support");
  read_modules_to_save(j, path, &config);
  const nlohmann::ordered_json token_indices =
      j.contains("trainable_token_indices") ? j["trainable_token_indices"] : nlohmann::ordered_json();
  if (!token_indices.is_null() && !(token_indices.is_array() && token_indices.empty())) {
    try {
      config.set_token_indices(token_indices);
    } catch (const Error& e) {
      fail(Status::Io, "'", path, "': ", e.what());
    }
  }
  if (j.contains("layer_replication") && !j["layer_replication"].is_null() &&
      !(j["layer_replication"].is_array() && j["layer_replication"].empty()))
    refuse("layer_replication", "is set: it is not supported");
  // PEFT's LoRA variants and settings that change what the adapters compute: not built, so a file
  // that sets them is refused rather than read as plain LoRA.
  for (const char* variant : {"alora_invocation_tokens", "velora_config", "monteclora_config", "use_bdlora",
                              "arrow_config", "kasa_config", "megatron_config"})
    if (j.contains(variant) && !j[variant].is_null())
      refuse(variant, "is set: PEFT's LoRA variant is not supported (its adapters would compute otherwise here)");
  if (flag("use_qalora")) refuse("use_qalora", "is true: QALoRA (for GPTQ-quantised layers) is not supported");
  config.ensure_weight_tying = flag("ensure_weight_tying");
  if (j.contains("target_parameters") && !j["target_parameters"].is_null()) {
    try {
      config.set_target_parameters(j["target_parameters"]);
    } catch (const Error& e) {
      fail(Status::Io, "'", path, "': ", e.what());
    }
  }
  read_patterns(j, path, &config);
  const std::vector<std::string> layer_lists = read_layer_settings(j, path, &config);
  if (j.contains("init_lora_weights")) {
    const json& init = j["init_lora_weights"];
    if (init.is_boolean()) config.init = init.get<bool>() ? "true" : "false";
    // "eva" and "orthogonal" initialise the adapters only (the loaded weights replace them). PiSSA and
    // OLoRA change the base weights too: loaded into a model without adapters, they decompose its
    // weights first, as PEFT's from_pretrained does, so the adapters' base is the residual of the
    // model they were trained from. MiCA's B comes from the weight and is read back as it was
    // saved. LoftQ quantises the weights as PEFT's from_pretrained does (quantising what is quantised
    // already changes nothing). CorDA's residual cannot be rebuilt.
    else if (init == "corda")
      refuse("init_lora_weights",
             "is \"corda\": CorDA's adapters sit on the residual of the weights their start took from data, which "
             "a file cannot rebuild (PEFT's from_pretrained cannot either); convert them to a start of true "
             "(PEFT's path_initial_model_for_weight_conversion) or load them with the model they were trained in");
    else if (init == "gaussian" || init == "eva" || init == "orthogonal" || init == "mica" ||
             (init.is_string() && decomposes_weight(init.get<std::string>())))
      config.init = init.get<std::string>();
    else
      refuse("init_lora_weights",
             "must be true, false, \"gaussian\", \"eva\", \"orthogonal\", \"mica\", \"olora\", \"pissa\", "
             "\"pissa_niter_<n>\", \"lora_ga\" or \"loftq\"");
  }
  if (config.lora_bias && config.init != "true" && config.init != "false")
    refuse("lora_bias", "is true with init_lora_weights \"" + config.init +
                            "\": PEFT's LoraConfig takes lora_bias with true or false alone (its ValueError)");
  if (config.init == "loftq") config.loftq = read_loftq_config(j, path);
  if (j.contains("eva_config") && !j["eva_config"].is_null()) {
    const auto& eva = j["eva_config"];
    if (!eva.is_object()) refuse("eva_config", "must be an object (PEFT's EvaConfig) or null");
    auto field = [&](const char* key, auto check, auto* out) {
      if (!eva.contains(key)) return;
      if (!check(eva[key])) refuse("eva_config", std::string("has an invalid '") + key + "'");
      *out = eva[key].template get<std::decay_t<decltype(*out)>>();
    };
    auto is_number = [](const json& v) { return v.is_number(); };
    auto is_bool = [](const json& v) { return v.is_boolean(); };
    field("rho", is_number, &config.eva.rho);
    field("tau", is_number, &config.eva.tau);
    field("use_label_mask", is_bool, &config.eva.use_label_mask);
    field(
        "label_mask_value", [](const json& v) { return v.is_number_integer(); }, &config.eva.label_mask_value);
    field("whiten", is_bool, &config.eva.whiten);
    field("adjust_scaling_factors", is_bool, &config.eva.adjust_scaling_factors);
    if (!(config.eva.rho >= 1 && config.eva.rho <= 1e9)) refuse("eva_config", "has a rho below 1 (PEFT's ValueError)");
    if (!(config.eva.tau >= 0 && config.eva.tau <= 1)) refuse("eva_config", "has a tau outside [0, 1]");
  }
  if (j.contains("lora_ga_config") && !j["lora_ga_config"].is_null()) {
    const auto& ga = j["lora_ga_config"];
    auto one_of = [&](const char* key, std::initializer_list<const char*> values, std::string* out) {
      if (!ga.contains(key)) return;
      for (const char* v : values)
        if (ga[key] == v) {
          *out = v;
          return;
        }
      refuse("lora_ga_config", std::string("has an invalid '") + key + "'");
    };
    if (!ga.is_object()) refuse("lora_ga_config", "must be an object (PEFT's LoraGAConfig) or null");
    one_of("direction", {"ArB2r", "A2rBr", "ArBr", "random"}, &config.lora_ga.direction);
    one_of("scale", {"stable", "weight_svd", "gd_scale", "unit"}, &config.lora_ga.scale);
    if (ga.contains("stable_gamma")) {
      if (!ga["stable_gamma"].is_number_integer() || ga["stable_gamma"].get<int64_t>() < 1)
        refuse("lora_ga_config", "has an invalid 'stable_gamma'");
      config.lora_ga.stable_gamma = ga["stable_gamma"].get<int64_t>();
    }
  }
  read_texts(j, path, &config);
  if (!j.contains("target_modules")) refuse("target_modules", "is missing");
  // Null (or empty) with target_parameters: the parameters alone, as PEFT allows.
  const bool no_modules =
      j["target_modules"].is_null() || (j["target_modules"].is_array() && j["target_modules"].empty());
  if (!no_modules || config.target_parameters.empty())
    read_modules(j, path, "target_modules", &config.target_names, &config, &LoraConfig::set_target_regex);
  read_exclude_modules(j, path, &config);
  finish_layer_settings(j, path, layer_lists, &config);
  return config;
}

}  // namespace acc

#include "config/sharding_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/options.h"
#include "common/text.h"
#include "parallel/ignored_modules.h"

namespace acc {
namespace {

using nlohmann::json;

// Keys that tune FSDP or DeepSpeed machinery this runtime does not have; accepted with a warning.
const std::set<std::string>& ignored_fsdp_keys() {
  static const std::set<std::string> keys = {
      "fsdp_backward_prefetch",  "fsdp_forward_prefetch",          "fsdp_use_orig_params",
      "fsdp_sync_module_states"};
  return keys;
}

const std::set<std::string>& ignored_deepspeed_keys() {
  // The multi-machine launcher's (config_file.cpp refuses all but "standard", which needs none of
  // them), and the MoE layer classes DeepSpeed's stage 3 keeps whole as leaves (its units; here the
  // wrap policy's are).
  static const std::set<std::string> keys = {"deepspeed_multinode_launcher", "deepspeed_hostfile",
                                             "deepspeed_inclusion_filter", "deepspeed_exclusion_filter",
                                             "deepspeed_moe_layer_cls_names"};
  return keys;
}

// Who says a value, for errors: a config key ("f.yaml: fsdp_config: fsdp_sharding_strategy = X")
// or a launcher variable ("environment variable FSDP_SHARDING_STRATEGY='X'").
struct Source {
  std::string prefix;  // origin + ": " for a key; empty for a variable
  bool variable = false;
  std::string say(const std::string& name, const std::string& value) const {
    return variable ? "environment variable " + name + "='" + value + "'" : prefix + name + " = " + value;
  }
};

[[noreturn]] void unsupported(const Source& from, const std::string& name, const std::string& value,
                              const std::string& why) {
  fail(Status::Unsupported, from.say(name, value), " is not supported: ", why);
}

bool flag(const Source& from, const std::string& name, const std::string& value) {
  auto b = parse_bool(value);
  require(b.has_value(), from.say(name, value), ": must be true or false");
  return *b;
}

// FSDP's sharding strategy by name or by the enum's number (older Accelerate writes numbers); none
// when `value` names no strategy.
std::optional<std::string> known_fsdp_strategy(const std::string& value) {
  static const std::map<std::string, std::string> numbers = {
      {"1", "FULL_SHARD"}, {"2", "SHARD_GRAD_OP"}, {"3", "NO_SHARD"}, {"4", "HYBRID_SHARD"}, {"5", "HYBRID_SHARD_ZERO2"}};
  // In any case, as Accelerate upper-cases it.
  std::string strategy = uppercase(value);
  if (numbers.count(value)) strategy = numbers.at(value);
  if (strategy == "_HYBRID_SHARD_ZERO2") strategy = "HYBRID_SHARD_ZERO2";  // torch's enum name
  if (strategy == "FULL_SHARD" || strategy == "SHARD_GRAD_OP" || strategy == "NO_SHARD" || strategy == "HYBRID_SHARD" ||
      strategy == "HYBRID_SHARD_ZERO2")
    return strategy;
  return std::nullopt;
}

std::string fsdp_strategy(const Source& from, const std::string& name, const std::string& value) {
  auto strategy = known_fsdp_strategy(value);
  require(strategy.has_value(), from.say(name, value),
          ": must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or HYBRID_SHARD_ZERO2");
  return *strategy;
}

int64_t fsdp_stage(const std::string& strategy) {
  if (strategy == "FULL_SHARD" || strategy == "HYBRID_SHARD") return 3;
  return strategy == "SHARD_GRAD_OP" || strategy == "HYBRID_SHARD_ZERO2" ? 2 : 0;
}

bool fsdp_hybrid(const std::string& strategy) { return strategy.rfind("HYBRID_SHARD", 0) == 0; }

// A state dict type as Accelerate's plugin takes it: a name in any case, or StateDictType's number.
std::string state_dict_type(const Source& from, const std::string& name, const std::string& value) {
  const std::string upper = value == "1"   ? "FULL_STATE_DICT"
                            : value == "2" ? "LOCAL_STATE_DICT"
                            : value == "3" ? "SHARDED_STATE_DICT"
                                           : uppercase(value);
  if (upper == "LOCAL_STATE_DICT") unsupported(from, name, value, "use FULL_STATE_DICT or SHARDED_STATE_DICT");
  require(upper == "FULL_STATE_DICT" || upper == "SHARDED_STATE_DICT", from.say(name, value),
          ": must be FULL_STATE_DICT or SHARDED_STATE_DICT (or 1 or 3)");
  return upper;
}

// A policy in any case (Accelerate upper-cases it), upper-cased.
std::string wrap_policy(const Source& from, const std::string& name, const std::string& value) {
  const std::string upper = uppercase(value);
  const auto& policies = auto_wrap_policies();
  require(std::find(policies.begin(), policies.end(), upper) != policies.end(), from.say(name, value),
          ": must be TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP");
  return upper;
}

int64_t min_num_params(const Source& from, const std::string& name, const std::string& value) {
  require(!value.empty() && value.size() <= 18 && value.find_first_not_of("0123456789") == std::string::npos,
          from.say(name, value), ": must be a number of parameters (0 or more)");
  return std::stoll(value);
}

int64_t zero_stage(const Source& from, const std::string& name, const std::string& value) {
  require(value.size() == 1 && value[0] >= '0' && value[0] <= '3', from.say(name, value), ": must be 0, 1, 2 or 3");
  return value[0] - '0';
}

// An offload device: true for cpu.
bool offload_device(const Source& from, const std::string& name, const std::string& given) {
  const std::string value = lowercase(given);  // (Accelerate's launcher lower-cases it)
  if (value == "nvme") unsupported(from, name, given, "NVMe offload is not implemented (none or cpu)");
  require(value == "none" || value == "cpu", from.say(name, given), ": must be none or cpu");
  return value == "cpu";
}

bool names_a_file(const std::string& value) { return !value.empty() && value != "none"; }

// What a deepspeed_config key says, checked (errors name the key): the ShardingRequest fields.
void apply_deepspeed_key(const Source& from, const std::string& key, const std::string& value, ShardingRequest& r) {
  if (key == "zero_stage") {
    r.stage = zero_stage(from, key, value);
  } else if (key == "offload_optimizer_device") {
    r.offload_optimizer = offload_device(from, key, value);
  } else if (key == "offload_param_device") {
    r.offload_params = offload_device(from, key, value);
  } else if (key == "gradient_accumulation_steps") {  // the rest come from a JSON file, already checked
    r.gradient_accumulation_steps = std::stoll(value);
  } else if (key == "gradient_clipping") {
    r.gradient_clipping = std::stod(value);
  } else if (key == "mixed_precision") {
    r.mixed_precision = value;
  } else if (key == "bf16_disabled" || key == "fp16_disabled") {
    r.disabled_precisions.push_back(key.substr(0, 4));
  } else if (key == "scaler_init_scale") {
    r.scaler_init_scale = std::stod(value);
  } else if (key == "scaler_growth_interval") {
    r.scaler_growth_interval = std::stoll(value);
  } else if (key == "scaler_hysteresis") {
    r.scaler_hysteresis = std::stoll(value);
  } else if (key == "scaler_consecutive_hysteresis") {
    r.scaler_consecutive_hysteresis = value == "true";
  } else if (key == "scaler_min_scale") {
    r.scaler_min_scale = std::stod(value);
  } else if (key == "zero3_save_16bit_model") {
    r.save_16bit_model = flag(from, key, value);
  }
}

// What a DeepSpeed JSON config says, into `r` (see deepspeed_file_settings).
void apply_deepspeed_file(const std::string& path, ShardingRequest& r, std::vector<std::string>& warnings) {
  const Source in_file{"DeepSpeed config '" + path + "': ", false};
  for (const auto& [key, value] : deepspeed_file_settings(path, warnings)) apply_deepspeed_key(in_file, key, value, r);
}

// DeepSpeed's own keys that only tune its engine: reported, not refused.
std::string ignored_in_file(const std::string& where, const std::string& key) {
  return where + key + " is ignored (it tunes DeepSpeed's engine, which is not used here)";
}

}  // namespace

std::optional<bool> fsdp_reshards_after_forward(const std::string& strategy) {
  const auto known = known_fsdp_strategy(strategy);
  if (!known) return std::nullopt;
  return fsdp_stage(*known) == 3;
}

const std::vector<std::string>& auto_wrap_policies() {
  static const std::vector<std::string> policies = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"};
  return policies;
}

SettingMap fsdp_environment(const SettingMap& settings, const std::string& origin, std::vector<std::string>& warnings) {
  const Source from{origin + ": ", false};
  SettingMap env{{"ACCELERATE_USE_FSDP", "true"}};
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = settings.find(key);
    return it == settings.end() || it->second.empty() ? nullptr : &it->second;
  };
  const std::string version = get("fsdp_version") ? *get("fsdp_version") : "1";
  require(version == "1" || version == "2", origin, ": fsdp_version must be 1 or 2, not '", version, "'");
  // Accelerate's launcher passes every variable of its FSDP flags, each flag's default where neither
  // flag nor file gives it (found by a hunt: a Python program launched here fell back to its
  // plugin's own defaults, use_orig_params false among them).
  env["FSDP_VERSION"] = version;
  env["FSDP_SHARDING_STRATEGY"] = "FULL_SHARD";
  const std::string* reshard_text = get("fsdp_reshard_after_forward");
  env["FSDP_RESHARD_AFTER_FORWARD"] = reshard_text ? lowercase(*reshard_text) : "true";
  for (const auto& [key, variable, fallback] :
       {std::tuple<const char*, const char*, const char*>{"fsdp_offload_params", "FSDP_OFFLOAD_PARAMS", "false"},
        {"fsdp_forward_prefetch", "FSDP_FORWARD_PREFETCH", "false"},
        {"fsdp_use_orig_params", "FSDP_USE_ORIG_PARAMS", "true"},
        {"fsdp_sync_module_states", "FSDP_SYNC_MODULE_STATES", "true"},
        {"fsdp_activation_checkpointing", "FSDP_ACTIVATION_CHECKPOINTING", "false"}}) {
    const std::string* s = get(key);
    env[variable] = s ? (flag(from, key, *s) ? "true" : "false") : fallback;
  }
  if (const std::string* s = get("fsdp_backward_prefetch")) env["FSDP_BACKWARD_PREFETCH"] = *s;
  if (version == "2") {
    // FSDP2 says whether parameters are freed after forward instead of naming a strategy.
    require(!get("fsdp_sharding_strategy"), origin, ": fsdp_version 2 takes fsdp_reshard_after_forward, not ",
            "fsdp_sharding_strategy");
    if (const std::string* s = get("fsdp_reshard_after_forward"))
      env["FSDP_RESHARD_AFTER_FORWARD"] = flag(from, "fsdp_reshard_after_forward", *s) ? "true" : "false";
  } else {
    const std::string* named = get("fsdp_sharding_strategy");
    const std::string* reshard = get("fsdp_reshard_after_forward");
    std::optional<std::string> by_reshard;
    if (reshard) {
      // Accelerate's questionnaire writes an FSDP1 strategy here (its launcher then sets
      // FSDP_SHARDING_STRATEGY to its flag's default, FULL_SHARD, which wins): the strategy the file
      // names is the one taken. true / false mean what they mean to FSDP2.
      const auto reshards = parse_bool(*reshard);
      by_reshard = reshards ? (*reshards ? "FULL_SHARD" : "SHARD_GRAD_OP")
                            : fsdp_strategy(from, "fsdp_reshard_after_forward", *reshard);
    }
    if (named) {
      const std::string strategy = fsdp_strategy(from, "fsdp_sharding_strategy", *named);
      // Accelerate lets fsdp_sharding_strategy win; two strategies are refused here rather than one dropped.
      // (The message is made only when refused: without fsdp_reshard_after_forward there is no *reshard.)
      if (by_reshard && *by_reshard != strategy)
        fail(Status::InvalidArgument, origin, ": fsdp_sharding_strategy ", *named, " and fsdp_reshard_after_forward ",
             *reshard, " name different sharding strategies: keep one");
      env["FSDP_SHARDING_STRATEGY"] = strategy;
    } else if (by_reshard) {
      env["FSDP_SHARDING_STRATEGY"] = *by_reshard;
    }
  }
  // Keys with no counterpart here are still checked as Accelerate checks them: a value it refuses is
  // refused, never ignored.
  if (const std::string* s = get("fsdp_backward_prefetch")) {
    const std::string upper = uppercase(*s);
    require(upper == "BACKWARD_PRE" || upper == "BACKWARD_POST" || upper == "NO_PREFETCH" || *s == "1" || *s == "2",
            from.say("fsdp_backward_prefetch", *s), ": must be BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
  }
  if (const std::string* s = get("fsdp_forward_prefetch"))
    require(!(flag(from, "fsdp_forward_prefetch", *s) && version == "2"), from.say("fsdp_forward_prefetch", *s),
            ": forward_prefetch is not implemented in FSDP2 (Accelerate's ValueError)");
  if (const std::string* s = get("fsdp_cpu_ram_efficient_loading")) {
    const std::string* sync = get("fsdp_sync_module_states");
    require(
        !(flag(from, "fsdp_cpu_ram_efficient_loading", *s) && sync && !flag(from, "fsdp_sync_module_states", *sync)),
        origin, ": fsdp_cpu_ram_efficient_loading true needs fsdp_sync_module_states true (Accelerate's ValueError)");
  }
  if (const std::string* s = get("fsdp_state_dict_type"))
    env["FSDP_STATE_DICT_TYPE"] = state_dict_type(from, "fsdp_state_dict_type", *s);
  if (const std::string* s = get("fsdp_auto_wrap_policy"))
    env["FSDP_AUTO_WRAP_POLICY"] = wrap_policy(from, "fsdp_auto_wrap_policy", *s);
  // Accelerate's launcher always passes it, true (its flag's default) unless given: only the main
  // process builds the weights.
  const std::string* ram_efficient = get("fsdp_cpu_ram_efficient_loading");
  env["FSDP_CPU_RAM_EFFICIENT_LOADING"] =
      !ram_efficient || flag(from, "fsdp_cpu_ram_efficient_loading", *ram_efficient) ? "true" : "false";
  if (const std::string* s = get("fsdp_transformer_layer_cls_to_wrap")) env["FSDP_TRANSFORMER_CLS_TO_WRAP"] = *s;
  if (const std::string* s = get("fsdp_ignored_modules")) {
    check_module_pattern(*s, from.prefix + "fsdp_ignored_modules");
    env["FSDP_IGNORED_MODULES"] = *s;
  }
  // Accelerate's launcher always passes it, 1e8 (its flag's default) unless given: what a
  // SIZE_BASED_WRAP policy then wraps (0, as its plugin takes it without a launcher, is one unit).
  const std::string* given_min = get("fsdp_min_num_params");
  env["FSDP_MIN_NUM_PARAMS"] =
      given_min ? std::to_string(min_num_params(from, "fsdp_min_num_params", *given_min)) : "100000000";
  for (const auto& [key, value] : settings) {
    static const std::set<std::string> read = {"fsdp_version",
                                               "fsdp_reshard_after_forward",
                                               "fsdp_sharding_strategy",
                                               "fsdp_offload_params",
                                               "fsdp_state_dict_type",
                                               "fsdp_auto_wrap_policy",
                                               "fsdp_min_num_params",
                                               "fsdp_transformer_layer_cls_to_wrap",
                                               "fsdp_cpu_ram_efficient_loading",
                                               "fsdp_activation_checkpointing",
                                               "fsdp_ignored_modules"};
    if (read.count(key)) continue;
    if (ignored_fsdp_keys().count(key)) warnings.push_back("fsdp_config." + key + " is ignored (no counterpart here)");
    else warnings.push_back("fsdp_config." + key + " is unknown and ignored");
  }
  return env;
}

SettingMap deepspeed_environment(const SettingMap& settings, const std::string& origin,
                                 std::vector<std::string>& warnings) {
  const Source from{origin + ": ", false};
  SettingMap env{{"ACCELERATE_USE_DEEPSPEED", "true"}};
  for (const auto& [key, value] : settings) {
    if (key == "zero_stage") {
      zero_stage(from, key, value);
      env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] = value;
    } else if (key == "offload_optimizer_device" || key == "offload_param_device") {
      offload_device(from, key, value);
      env[key == "offload_optimizer_device" ? "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"
                                            : "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"] = lowercase(value);
    } else if (key == "zero3_init_flag") {
      env["ACCELERATE_DEEPSPEED_ZERO3_INIT"] = flag(from, key, value) ? "true" : "false";
    } else if (key == "zero3_save_16bit_model") {
      env["ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"] = flag(from, key, value) ? "true" : "false";
    } else if (key == "gradient_accumulation_steps") {
      if (value == "auto") continue;
      require(!value.empty() && value.find_first_not_of("0123456789") == std::string::npos && value != "0", origin,
              ": gradient_accumulation_steps must be a positive integer or auto, not '", value, "'");
      env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = value;
    } else if (key == "gradient_clipping") {
      if (value == "auto" || value == "none") continue;
      char* end = nullptr;
      const double norm = std::strtod(value.c_str(), &end);
      require(!value.empty() && end == value.c_str() + value.size() && std::isfinite(norm) && norm >= 0, origin,
              ": gradient_clipping must be a number >= 0 or auto, not '", value, "'");
      env["ACCELERATE_GRADIENT_CLIPPING"] = value;
    } else if (key == "deepspeed_config_file") {
      if (!names_a_file(value)) continue;
      // As Accelerate: the file holds these, never the accelerate config beside it.
      for (const char* own : {"zero_stage", "offload_optimizer_device", "offload_param_device",
                              "gradient_accumulation_steps", "gradient_clipping"})
        require(!settings.count(own), origin, ": ", own, " is set beside deepspeed_config_file: set it in the DeepSpeed ",
                "config file (", value, ") instead");
      ShardingRequest checked;  // its errors now, at launch
      apply_deepspeed_file(value, checked, warnings);
      env["ACCELERATE_DEEPSPEED_CONFIG_FILE"] = std::filesystem::absolute(value).string();
    } else if (key == "deepspeed_multinode_launcher" && value == "standard") {
      continue;  // one launch per machine: what this launcher does
    } else if (ignored_deepspeed_keys().count(key)) {
      warnings.push_back("deepspeed_config." + key + " is ignored (no counterpart here)");
    } else {
      warnings.push_back("deepspeed_config." + key + " is unknown and ignored");
    }
  }
  return env;
}

SettingMap deepspeed_file_settings(const std::string& path, std::vector<std::string>& warnings) {
  const auto text = read_whole_file(path);
  if (!text) fail(Status::Io, "cannot open DeepSpeed config '", path, "'");
  const std::string where = "DeepSpeed config '" + path + "': ";
  const json j = parse_json_input(*text, "DeepSpeed config '" + path + "'", Status::Io);
  if (!j.is_object()) fail(Status::Io, where, "not a JSON object");
  auto refuse = [&](const std::string& key, const std::string& why) { fail(Status::InvalidArgument, where, key, " ", why); };
  auto is_auto = [](const json& v) { return v.is_string() && v.get<std::string>() == "auto"; };
  auto whole = [&](const json& v, const std::string& key, int64_t low, int64_t high) {
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > high)
      refuse(key, "must be a whole number from " + std::to_string(low) + " to " + std::to_string(high) + ", not " + v.dump());
    return v.get<int64_t>();
  };
  SettingMap out;
  if (!j.contains("zero_optimization") || !j["zero_optimization"].is_object())
    refuse("zero_optimization", "is missing: Accelerate needs the ZeRO section");
  for (const auto& [key, value] : j["zero_optimization"].items()) {
    const std::string name = "zero_optimization." + key;
    if (key == "stage") {
      if (!is_auto(value)) out["zero_stage"] = std::to_string(whole(value, name, 0, 3));
    } else if (key == "stage3_gather_16bit_weights_on_model_save") {
      if (is_auto(value)) continue;  // Accelerate fills it from zero3_save_16bit_model
      if (!value.is_boolean()) refuse(name, "must be true, false or auto, not " + value.dump());
      out["zero3_save_16bit_model"] = value.get<bool>() ? "true" : "false";
    } else if (key == "cpu_offload" || key == "cpu_offload_param") {  // DeepSpeed's deprecated spellings
      if (!value.is_boolean()) refuse(name, "must be true or false, not " + value.dump());
      const std::string device = key == "cpu_offload" ? "offload_optimizer_device" : "offload_param_device";
      if (value.get<bool>()) {
        if (out.count(device) && out[device] != "cpu")
          refuse(name, "contradicts the offload device given beside it (" + out[device] + ")");
        out[device] = "cpu";
      }
    } else if (key == "offload_optimizer" || key == "offload_param") {
      if (!value.is_object()) refuse(name, "must be an object");
      for (const auto& [inner, setting] : value.items()) {
        if (inner == "ratio" && !(setting.is_number() && setting.get<double>() == 1.0)) {
          fail(Status::Unsupported, where, name, ".ratio ", setting.dump(),
               ": a partial offload is not built (the whole optimizer state is offloaded: leave ratio out, or 1)");
        } else if (inner != "device") {
          warnings.push_back(ignored_in_file(where, name + "." + inner));
        } else if (!is_auto(setting)) {
          if (!setting.is_string()) refuse(name + ".device", "must be none or cpu");
          out[key == "offload_optimizer" ? "offload_optimizer_device" : "offload_param_device"] = setting.get<std::string>();
        }
      }
    } else {
      warnings.push_back(ignored_in_file(where, name));
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "zero_optimization") continue;
    if (key == "optimizer" || key == "scheduler")
      fail(Status::Unsupported, where, key, " is not supported: DeepSpeed would build it; create it with acc_",
           key == "optimizer" ? "optimizer_create" : "scheduler_create", " (Accelerate's Dummy", key == "optimizer" ? "Optim" : "Scheduler",
           " has no counterpart)");
    if (key == "gradient_accumulation_steps") {
      if (!is_auto(value)) out[key] = std::to_string(whole(value, key, 1, int64_t{1} << 30));
    } else if (key == "gradient_clipping") {
      if (is_auto(value)) continue;
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
        refuse(key, "must be a number >= 0, not " + value.dump());
      out[key] = concat(value.get<double>());
    } else if (key == "bf16" || key == "fp16") {
      if (!value.is_object()) refuse(key, "must be an object");
      for (const auto& [inner, setting] : value.items()) {
        const std::string name = key + "." + inner;
        if (inner == "enabled") {
          if (is_auto(setting)) continue;
          if (!setting.is_boolean()) refuse(name, "must be true, false or auto");
          if (!setting.get<bool>()) {
            out[key + "_disabled"] = "true";  // a mixed_precision of this dtype contradicts it
            continue;
          }
          if (out.count("mixed_precision")) refuse(name, "is true, and so is " + out["mixed_precision"] + ".enabled");
          out["mixed_precision"] = key;
        } else if (key == "fp16" && inner == "loss_scale") {
          if (!is_auto(setting) && !(setting.is_number() && setting.get<double>() == 0))
            fail(Status::Unsupported, where, name, " is not supported: a static loss scale (0, dynamic scaling, is)");
        } else if (key == "fp16" && inner == "initial_scale_power") {
          if (!is_auto(setting)) out["scaler_init_scale"] = concat(std::ldexp(1.0, static_cast<int>(whole(setting, name, 0, 64))));
        } else if (key == "fp16" && inner == "loss_scale_window") {
          if (!is_auto(setting)) out["scaler_growth_interval"] = std::to_string(whole(setting, name, 1, int64_t{1} << 30));
        } else if (key == "fp16" && inner == "hysteresis") {
          if (!is_auto(setting)) out["scaler_hysteresis"] = std::to_string(whole(setting, name, 1, int64_t{1} << 30));
        } else if (key == "fp16" && inner == "consecutive_hysteresis") {
          if (is_auto(setting)) continue;
          if (!setting.is_boolean()) refuse(name, "must be true, false or auto");
          out["scaler_consecutive_hysteresis"] = setting.get<bool>() ? "true" : "false";
        } else if (key == "fp16" && inner == "min_loss_scale") {
          if (is_auto(setting)) continue;
          if (!setting.is_number() || !std::isfinite(setting.get<double>()) || setting.get<double>() < 0)
            refuse(name, "must be a number >= 0, not " + setting.dump());
          out["scaler_min_scale"] = concat(setting.get<double>());
        } else if (inner != "auto_cast") {
          warnings.push_back(where + name + " is ignored (fp16 here is DeepSpeed's dynamic loss scaler: " +
                             "initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis, " +
                             "min_loss_scale)");
        }
      }
    } else if ((key == "train_batch_size" || key == "train_micro_batch_size_per_gpu") && is_auto(value)) {
      continue;
    } else if (key == "train_batch_size" || key == "train_micro_batch_size_per_gpu") {
      warnings.push_back(where + key + " is ignored: the batch size is the data loader's");
    } else {
      warnings.push_back(ignored_in_file(where, key));
    }
  }
  return out;
}

std::optional<ShardingRequest> sharding_from_environment(const VariableLookup& lookup) {
  const Source from{"", true};
  auto is_true = [&](const char* name) {
    auto value = lookup(name);
    return value && flag(from, name, *value);
  };
  ShardingRequest r;
  // Both set: DeepSpeed, as Accelerate's state checks it first.
  if (is_true("ACCELERATE_USE_DEEPSPEED")) {
    r.kind = "DEEPSPEED";
    const char* const stage = "ACCELERATE_DEEPSPEED_ZERO_STAGE";
    r.stage = zero_stage(from, stage, lookup(stage).value_or("2"));  // DeepSpeedPlugin's default
    for (const char* name : {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"}) {
      const bool cpu = offload_device(from, name, lookup(name).value_or("none"));
      (std::string(name).find("OPTIMIZER") != std::string::npos ? r.offload_optimizer : r.offload_params) = cpu;
    }
    r.save_16bit_model = is_true("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL");
    // A DeepSpeed JSON config: what it says wins over the variables (Accelerate fills only its
    // "auto" values from them).
    if (auto path = lookup("ACCELERATE_DEEPSPEED_CONFIG_FILE"); path && names_a_file(*path)) {
      std::vector<std::string> reported;  // the launcher showed them
      try {
        apply_deepspeed_file(*path, r, reported);
      } catch (const Error& e) {
        fail(e.status(), "environment variable ACCELERATE_DEEPSPEED_CONFIG_FILE='", *path, "': ", e.what());
      }
    }
    // zero.Init is stage 3's, on unless said otherwise (Accelerate's DeepSpeedPlugin takes an unset
    // ACCELERATE_DEEPSPEED_ZERO3_INIT as the config's is_zero3()).
    r.main_process_loads =
        r.stage == 3 && (!lookup("ACCELERATE_DEEPSPEED_ZERO3_INIT") || is_true("ACCELERATE_DEEPSPEED_ZERO3_INIT"));
    return r;
  }
  if (is_true("ACCELERATE_USE_FSDP")) {
    r.kind = "FSDP";
    std::string strategy = "FULL_SHARD";  // FSDP's default
    const std::string version = lookup("FSDP_VERSION").value_or("1");
    require(version == "1" || version == "2", "environment variable FSDP_VERSION='", version, "' must be 1 or 2");
    if (version == "2")
      strategy = !lookup("FSDP_RESHARD_AFTER_FORWARD") || is_true("FSDP_RESHARD_AFTER_FORWARD") ? "FULL_SHARD"
                                                                                                : "SHARD_GRAD_OP";
    else if (auto s = lookup("FSDP_SHARDING_STRATEGY"))
      strategy = fsdp_strategy(from, "FSDP_SHARDING_STRATEGY", *s);
    r.stage = fsdp_stage(strategy);
    r.hybrid = fsdp_hybrid(strategy);
    r.offload_params = r.offload_optimizer = is_true("FSDP_OFFLOAD_PARAMS");
    if (auto s = lookup("FSDP_STATE_DICT_TYPE")) r.state_dict_type = state_dict_type(from, "FSDP_STATE_DICT_TYPE", *s);
    else if (version == "2")
      r.state_dict_type = "SHARDED_STATE_DICT";  // Accelerate's default for FSDP2
    if (auto s = lookup("FSDP_AUTO_WRAP_POLICY")) r.auto_wrap_policy = wrap_policy(from, "FSDP_AUTO_WRAP_POLICY", *s);
    if (auto s = lookup("FSDP_MIN_NUM_PARAMS")) r.min_num_params = min_num_params(from, "FSDP_MIN_NUM_PARAMS", *s);
    if (auto s = lookup("FSDP_TRANSFORMER_CLS_TO_WRAP")) r.transformer_cls_to_wrap = *s;
    if (auto s = lookup("FSDP_IGNORED_MODULES")) {
      check_module_pattern(*s, "environment variable FSDP_IGNORED_MODULES");
      r.ignored_modules = *s;
    }
    r.main_process_loads = is_true("FSDP_CPU_RAM_EFFICIENT_LOADING");
    r.activation_checkpointing = is_true("FSDP_ACTIVATION_CHECKPOINTING");
    // Variables that tune torch's FSDP machinery (ignored_fsdp_keys: no counterpart here) are still
    // checked, as Accelerate's plugin checks them: a typo is named, not ignored.
    for (const char* name : {"FSDP_SYNC_MODULE_STATES", "FSDP_USE_ORIG_PARAMS", "FSDP_FORWARD_PREFETCH"})
      (void)is_true(name);
    if (auto s = lookup("FSDP_BACKWARD_PREFETCH")) {
      static const std::set<std::string> kinds = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
      require(kinds.count(uppercase(*s)) != 0, from.say("FSDP_BACKWARD_PREFETCH", *s),
              ": must be BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
    }
    return r;
  }
  return std::nullopt;
}

}  // namespace acc

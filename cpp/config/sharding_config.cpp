#include "config/sharding_config.h"

#include <set>

#include "common/error.h"
#include "common/options.h"

namespace acc {
namespace {

// Keys that tune FSDP or DeepSpeed machinery this runtime does not have; accepted with a warning.
const std::set<std::string>& ignored_fsdp_keys() {
  static const std::set<std::string> keys = {
      "fsdp_backward_prefetch",  "fsdp_forward_prefetch",          "fsdp_use_orig_params",
      "fsdp_sync_module_states", "fsdp_cpu_ram_efficient_loading", "fsdp_transformer_layer_cls_to_wrap",
      "fsdp_activation_checkpointing"};
  return keys;
}

const std::set<std::string>& ignored_deepspeed_keys() {
  static const std::set<std::string> keys = {"zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher",
                                             "gradient_clipping"};
  return keys;
}

[[noreturn]] void unsupported(const std::string& origin, const std::string& key, const std::string& value,
                              const std::string& why) {
  fail(Status::Unsupported, origin, ": ", key, " = ", value, " is not supported: ", why);
}

bool flag(const std::string& origin, const std::string& key, const std::string& value) {
  auto b = parse_bool(value);
  require(b.has_value(), origin, ": ", key, " must be true or false, not '", value, "'");
  return *b;
}

}  // namespace

SettingMap fsdp_environment(const SettingMap& settings, const std::string& origin, std::vector<std::string>& warnings) {
  SettingMap env{{"ACCELERATE_USE_FSDP", "true"}};
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = settings.find(key);
    return it == settings.end() || it->second.empty() ? nullptr : &it->second;
  };
  const std::string version = get("fsdp_version") ? *get("fsdp_version") : "1";
  require(version == "1" || version == "2", origin, ": fsdp_version must be 1 or 2, not '", version, "'");
  if (version == "2") {
    // FSDP2 says whether parameters are freed after forward instead of naming a strategy.
    require(!get("fsdp_sharding_strategy"), origin, ": fsdp_version 2 takes fsdp_reshard_after_forward, not ",
            "fsdp_sharding_strategy");
    const bool reshard = !get("fsdp_reshard_after_forward") ||
                         flag(origin, "fsdp_reshard_after_forward", *get("fsdp_reshard_after_forward"));
    env["FSDP_SHARDING_STRATEGY"] = reshard ? "FULL_SHARD" : "SHARD_GRAD_OP";
  } else if (const std::string* s = get("fsdp_sharding_strategy")) {
    static const std::map<std::string, std::string> names = {{"1", "FULL_SHARD"}, {"2", "SHARD_GRAD_OP"},
                                                             {"3", "NO_SHARD"},   {"4", "HYBRID_SHARD"},
                                                             {"5", "HYBRID_SHARD_ZERO2"}};
    const std::string name = names.count(*s) ? names.at(*s) : *s;
    if (name == "HYBRID_SHARD" || name == "HYBRID_SHARD_ZERO2")
      unsupported(origin, "fsdp_sharding_strategy", *s, "hybrid sharding (within a node, replicated across nodes) is not implemented");
    require(name == "FULL_SHARD" || name == "SHARD_GRAD_OP" || name == "NO_SHARD", origin,
            ": fsdp_sharding_strategy must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD, not '", *s, "'");
    env["FSDP_SHARDING_STRATEGY"] = name;
  }
  if (const std::string* s = get("fsdp_offload_params"))
    env["FSDP_OFFLOAD_PARAMS"] = flag(origin, "fsdp_offload_params", *s) ? "true" : "false";
  if (const std::string* s = get("fsdp_state_dict_type")) {
    if (*s == "LOCAL_STATE_DICT") unsupported(origin, "fsdp_state_dict_type", *s, "use FULL_STATE_DICT or SHARDED_STATE_DICT");
    require(*s == "FULL_STATE_DICT" || *s == "SHARDED_STATE_DICT", origin,
            ": fsdp_state_dict_type must be FULL_STATE_DICT or SHARDED_STATE_DICT, not '", *s, "'");
    env["FSDP_STATE_DICT_TYPE"] = *s;
  }
  if (const std::string* s = get("fsdp_auto_wrap_policy")) {
    if (*s != "TRANSFORMER_BASED_WRAP")
      unsupported(origin, "fsdp_auto_wrap_policy", *s,
                  "units are a spec model's layers and a TorchScript model as a whole (TRANSFORMER_BASED_WRAP)");
    env["FSDP_AUTO_WRAP_POLICY"] = *s;
  }
  if (const std::string* s = get("fsdp_min_num_params"); s && *s != "0")
    unsupported(origin, "fsdp_min_num_params", *s, "size-based wrapping is not implemented");
  for (const auto& [key, value] : settings) {
    static const std::set<std::string> read = {"fsdp_version",        "fsdp_reshard_after_forward", "fsdp_sharding_strategy",
                                               "fsdp_offload_params", "fsdp_state_dict_type",      "fsdp_auto_wrap_policy",
                                               "fsdp_min_num_params"};
    if (read.count(key)) continue;
    if (ignored_fsdp_keys().count(key)) warnings.push_back("fsdp_config." + key + " is ignored (no counterpart here)");
    else warnings.push_back("fsdp_config." + key + " is unknown and ignored");
  }
  return env;
}

SettingMap deepspeed_environment(const SettingMap& settings, const std::string& origin,
                                 std::vector<std::string>& warnings) {
  SettingMap env{{"ACCELERATE_USE_DEEPSPEED", "true"}};
  for (const auto& [key, value] : settings) {
    if (key == "zero_stage") {
      require(value.size() == 1 && value[0] >= '0' && value[0] <= '3', origin, ": zero_stage must be 0, 1, 2 or 3, not '",
              value, "'");
      env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] = value;
    } else if (key == "offload_optimizer_device" || key == "offload_param_device") {
      if (value == "nvme") unsupported(origin, key, value, "NVMe offload is not implemented (none or cpu)");
      require(value == "none" || value == "cpu", origin, ": ", key, " must be none or cpu, not '", value, "'");
      env[key == "offload_optimizer_device" ? "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"
                                            : "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"] = value;
    } else if (key == "gradient_accumulation_steps") {
      if (value == "auto") continue;
      require(!value.empty() && value.find_first_not_of("0123456789") == std::string::npos && value != "0", origin,
              ": gradient_accumulation_steps must be a positive integer or auto, not '", value, "'");
      env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = value;
    } else if (key == "deepspeed_config_file") {
      if (!value.empty() && value != "none")
        unsupported(origin, key, value, "DeepSpeed's JSON config is not read (set zero_stage and offload_*_device)");
    } else if (ignored_deepspeed_keys().count(key)) {
      warnings.push_back("deepspeed_config." + key + " is ignored (no counterpart here)");
    } else {
      warnings.push_back("deepspeed_config." + key + " is unknown and ignored");
    }
  }
  return env;
}

}  // namespace acc

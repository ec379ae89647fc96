// Accelerate's sharding settings, from a config file's fsdp_config / deepspeed_config or from
// `accelerate launch --use_fsdp ... / --use_deepspeed ...`, turned into the environment variables
// Accelerate's launcher gives its processes (ACCELERATE_USE_FSDP, FSDP_SHARDING_STRATEGY, ...;
// ACCELERATE_USE_DEEPSPEED, ACCELERATE_DEEPSPEED_ZERO_STAGE, ...), which the accelerator reads
// (accelerator/config.cpp). A value this runtime cannot honour is an error naming the key; keys
// that tune what has no counterpart here are reported as ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc {

using SettingMap = std::map<std::string, std::string>;

// `settings`: fsdp_config's keys (fsdp_sharding_strategy, fsdp_offload_params, fsdp_state_dict_type,
// fsdp_auto_wrap_policy, fsdp_version, fsdp_reshard_after_forward, ...) as text. `origin` names the
// file or the flags in errors; ignored keys are appended to `warnings`.
SettingMap fsdp_environment(const SettingMap& settings, const std::string& origin, std::vector<std::string>& warnings);
// deepspeed_config's keys (zero_stage, offload_optimizer_device, offload_param_device, ...).
SettingMap deepspeed_environment(const SettingMap& settings, const std::string& origin,
                                 std::vector<std::string>& warnings);

// What the launcher variables ask for: FSDP's or DeepSpeed's sharding as a ZeRO stage.
struct ShardingRequest {
  std::string kind;  // "FSDP" or "DEEPSPEED"
  int64_t stage = 0;
  bool offload_optimizer = false;
  bool offload_params = false;
  bool hybrid = false;  // HYBRID_SHARD, HYBRID_SHARD_ZERO2
  std::optional<std::string> state_dict_type;
  std::optional<std::string> transformer_cls_to_wrap;  // FSDP_TRANSFORMER_CLS_TO_WRAP
  std::optional<std::string> auto_wrap_policy;         // FSDP_AUTO_WRAP_POLICY, upper case
  std::optional<int64_t> min_num_params;               // FSDP_MIN_NUM_PARAMS
  std::optional<std::string> ignored_modules;          // FSDP_IGNORED_MODULES
  // FSDP_CPU_RAM_EFFICIENT_LOADING, or ACCELERATE_DEEPSPEED_ZERO3_INIT under zero stage 3: only the
  // main process builds a model's weights (Model::make_weights_pending).
  bool main_process_loads = false;
  bool activation_checkpointing = false;  // FSDP_ACTIVATION_CHECKPOINTING
  // ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL, or the DeepSpeed config's
  // zero_optimization.stage3_gather_16bit_weights_on_model_save.
  bool save_16bit_model = false;
  // From a DeepSpeed JSON config (ACCELERATE_DEEPSPEED_CONFIG_FILE): what it sets that is not sharding.
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<double> gradient_clipping;
  std::optional<std::string> mixed_precision;  // "bf16" or "fp16" (bf16.enabled / fp16.enabled true)
  std::vector<std::string> disabled_precisions;  // "bf16" / "fp16" whose enabled is false
  std::optional<double> scaler_init_scale;     // 2 ** fp16.initial_scale_power
  std::optional<int64_t> scaler_growth_interval;  // fp16.loss_scale_window
  std::optional<int64_t> scaler_hysteresis;       // fp16.hysteresis
  std::optional<bool> scaler_consecutive_hysteresis;  // fp16.consecutive_hysteresis
  std::optional<double> scaler_min_scale;         // fp16.min_loss_scale
};

// DeepSpeed's JSON config (deepspeed_config_file) as settings: zero_stage, offload_optimizer_device,
// offload_param_device, gradient_accumulation_steps, gradient_clipping, mixed_precision,
// scaler_init_scale, scaler_growth_interval, scaler_hysteresis, scaler_consecutive_hysteresis,
// scaler_min_scale ("auto" values are left out: Accelerate's settings fill
// them). The optimizer and scheduler sections (DeepSpeed would build those objects) are
// ACC_ERR_UNSUPPORTED; keys that tune DeepSpeed's engine are reported in `warnings`.
SettingMap deepspeed_file_settings(const std::string& path, std::vector<std::string>& warnings);

// An FSDP1 sharding strategy (by name or the enum's number) as FSDP2's reshard_after_forward:
// true for FULL_SHARD and HYBRID_SHARD, false for the others; none when it names no strategy.
std::optional<bool> fsdp_reshards_after_forward(const std::string& strategy);

// A variable's value; none when it is unset or empty.
using VariableLookup = std::function<std::optional<std::string>(const char* name)>;

// FSDP's auto-wrap policies: TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP.
const std::vector<std::string>& auto_wrap_policies();

// Reads ACCELERATE_USE_FSDP / FSDP_* or ACCELERATE_USE_DEEPSPEED / ACCELERATE_DEEPSPEED_*, with the
// same checks as the config keys they come from (errors name the variable); none when neither is on.
std::optional<ShardingRequest> sharding_from_environment(const VariableLookup& lookup);

}  // namespace acc

// Accelerate's ParallelismConfig as its launcher hands it to the processes: from a config file's
// `parallelism_config` section (keys parallelism_config_dp_replicate_size, ..._dp_shard_size,
// ..._tp_size, ..._cp_size, ...) or `accelerate launch --use_parallelism_config
// --parallelism_config_dp_shard_size N ...`, as ACCELERATE_USE_PARALLELISM_CONFIG and the
// PARALLELISM_CONFIG_* variables. Its data-parallel dimensions are built (dp_shard_size: the
// processes sharing one copy of the model; dp_replicate_size: the groups holding replicas); tensor,
// context and sequence parallelism are refused by name.
#pragma once

#include <string>
#include <vector>

#include "config/sharding_config.h"

namespace acc {

// The settings' names without their "parallelism_config_" prefix (dp_replicate_size, dp_shard_size,
// tp_size, cp_size, cp_backend, cp_comm_strategy, sp_size, sp_backend, sp_seq_length,
// sp_seq_length_is_variable, sp_attn_implementation): the flags are --parallelism_config_<name>.
const std::vector<std::string>& parallelism_setting_names();

// Whether Accelerate's launcher variables ask for FSDP version 2 (ACCELERATE_USE_FSDP true and
// FSDP_VERSION 2; its default version is 1): where its ParallelismConfig shapes the shard groups.
bool launches_fsdp2(const VariableLookup& variables);

// The variables for `settings` (keys with their prefix), given the job's sharding variables
// (sharding_env: FSDP version 2 is where Accelerate applies the config). Sizes are integers >= 1;
// tp_size, cp_size or sp_size above 1 is ACC_ERR_UNSUPPORTED; sharding dimensions outside FSDP 2
// are an error naming `origin`; replicas alone outside FSDP are what DDP is (no variables).
// Unknown keys are appended to `warnings`.
SettingMap parallelism_environment(const SettingMap& settings, const SettingMap& sharding_env,
                                   const std::string& origin, std::vector<std::string>& warnings);

}  // namespace acc

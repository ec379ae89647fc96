// `accelerate to-fsdp2`: a config file's FSDP1 settings rewritten as FSDP2's, as Accelerate's
// command does: fsdp_sharding_strategy becomes fsdp_reshard_after_forward (FULL_SHARD and
// HYBRID_SHARD: true; SHARD_GRAD_OP, HYBRID_SHARD_ZERO2, NO_SHARD: false), the keys FSDP2 dropped
// (fsdp_backward_prefetch, fsdp_sync_module_states, fsdp_use_orig_params) and the one it lacks
// (fsdp_forward_prefetch) are left out, every other key is kept, and fsdp_version becomes 2.
#pragma once

#include <string>
#include <vector>

#include "config/config_file.h"

namespace acc {

// The converted config (checked as a config file is: `origin` names it in errors); what was left
// out, or why nothing changed, is appended to `notes`.
ClusterConfig convert_to_fsdp2(const ClusterConfig& config, const std::string& origin, std::vector<std::string>& notes);

}  // namespace acc

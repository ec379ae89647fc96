// How a prepared model is replicated or sharded: the settings of DataParallel and
// ShardedDataParallel, held as members of the accelerator's config (accelerator/config.h), whose
// option table fills them; the defaults here are the only ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "parallel/power_sgd_settings.h"

namespace acc {

// DistributedDataParallelKwargs.
struct DataParallelOptions {
  int64_t bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  bool gradient_as_bucket_view = false;  // gradients live in DDP's buckets: one copy of them less
  // The set of parameters that get gradients, and the order they come in, is the same every step:
  // the first averaging step reduces at the end of backward, then buckets follow that order, and
  // parameters unused in that step are never waited for (PyTorch DDP's static_graph).
  bool static_graph = false;
  // "no", "fp16" (the Reducer's built-in compression), "bf16", or PyTorch's PowerSGD: "power_sgd"
  // (matrix by matrix) or "batched_power_sgd" (the whole bucket as one matrix).
  std::string comm_hook = "no";
  std::string comm_wrapper = "no";  // PowerSGD on a 16-bit copy of each bucket: "fp16" or "bf16"
  std::string comm_state_option;    // PowerSGDState's arguments as a JSON object (power_sgd below)
  PowerSgdSettings power_sgd;       // parsed from comm_state_option when the options are resolved
  bool uses_power_sgd() const { return comm_hook == "power_sgd" || comm_hook == "batched_power_sgd"; }
};

// Sharded data parallelism (DeepSpeed's ZeRO stages; FSDP's strategies map onto them).
struct ShardingOptions {
  int64_t stage = 0;                // 0: not sharded (DDP); 1, 2 or 3
  bool offload_optimizer = false;   // the optimizer's slice and state in CPU memory
  bool offload_params = false;      // stage 3: parameter shards in CPU memory
  bool hybrid = false;              // shard within each machine, replicate across machines
  // Accelerate's ParallelismConfig: dp_shard_size > 1 shards within groups of that many consecutive
  // ranks (all of them: plain sharding; fewer: hybrid, dp_replicate_size groups holding replicas).
  // 0: not set. Their product is the number of processes.
  int64_t dp_shard_size = 0;
  int64_t dp_replicate_size = 0;
  // Stage 3's units, FSDP's auto_wrap_policy: "TRANSFORMER_BASED_WRAP" (the modules of the
  // classes below), "SIZE_BASED_WRAP" (torch's size_based_auto_wrap_policy with min_num_params;
  // 0: one unit, as Accelerate), "NO_WRAP" (one unit); none: the classes below if any are named,
  // else the submodules a TorchScript forward calls and a spec model's layers.
  std::optional<std::string> auto_wrap_policy;
  int64_t min_num_params = 0;
  // Module classes (comma-separated), FSDP's transformer_layer_cls_to_wrap.
  std::string transformer_cls_to_wrap;
  // FSDP's ignored_modules (parallel/ignored_modules.h): a regular expression of module names whose
  // parameters every process keeps whole; frozen ones only (FSDP leaves an ignored module's
  // gradients unreduced, for an optimizer of the program's own, which a sharded run has not).
  std::string ignored_modules;
  // FSDP's activation_checkpointing: the modules the wrap policy names (stage 3's units) are
  // recomputed in backward instead of keeping their activations; any stage, DDP too.
  bool activation_checkpointing = false;
  // Checkpoints: "FULL_STATE_DICT" (consolidated) or "SHARDED_STATE_DICT" (per process).
  std::string state_dict_type = "FULL_STATE_DICT";
  bool full_state_dict() const { return state_dict_type == "FULL_STATE_DICT"; }
  // DeepSpeed's zero3_save_16bit_model: stage 3's save_model and get_state_dict give the weights in
  // the mixed-precision dtype (bf16, fp16), as DeepSpeed's 16-bit consolidated state dict.
  bool save_16bit_model = false;
};

}  // namespace acc

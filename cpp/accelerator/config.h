// The Accelerator's settings: options set by the program, else Accelerate's environment variables
// (as `accelerate-launch` sets them), else defaults. Each default is a member initializer here or
// in a sub-config; accelerator_option_table() binds every ACC_OPTIONS_ACCELERATOR key to its member.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/option_table.h"
#include "parallel/parallel_options.h"
#include "precision/grad_scaler.h"

namespace acc {

struct AcceleratorConfig {
  bool cpu = false;
  std::string mixed_precision = "no";
  int64_t gradient_accumulation_steps = 1;
  bool sync_with_dataloader = true;  // the last batch of a prepared loader ends the window
  bool sync_each_batch = false;      // allreduce every micro-step (less memory), step at the window's end
  std::optional<uint64_t> seed;
  bool device_placement = true;
  bool step_scheduler_with_optimizer = true;
  bool split_batches = false;
  // ProjectConfiguration.
  std::string project_dir;
  std::string logging_dir;  // empty: project_dir
  bool automatic_checkpoint_naming = false;
  std::optional<int64_t> total_limit;
  int64_t iteration = 0;
  bool save_on_each_node = false;
  bool python_state_files = false;  // save_state also writes the files Python Accelerate's load_state reads
  std::string log_with;  // tracker names, comma-separated; empty: none
  bool even_batches = true;
  std::optional<bool> dispatch_batches;  // none: Accelerate's default (dispatch iterable datasets)
  std::optional<uint64_t> data_seed;     // with use_seedable_sampler: seed of prepared shuffling loaders that have none
  bool use_seedable_sampler = false;     // epoch e permutes with data_seed (else torch's initial seed) + e
  bool non_blocking = true;
  GradScalerOptions scaler;  // GradScalerKwargs (fp16)
  // DeepSpeed's gradient_clipping: each prepared optimizer's step first clips the gradients of its
  // model to this global L2 norm (after fp16 unscaling); 0: none.
  double gradient_clipping = 0;
  int64_t timeout_seconds = 1800;  // process-group creation and every collective
  std::optional<std::string> backend;  // "gloo" or "nccl"; none: nccl on CUDA, gloo on the CPU
  DataParallelOptions ddp;     // DistributedDataParallelKwargs
  ShardingOptions sharding;    // stage 0: DDP
  // Accelerate's DistributedType for a sharded job: "FSDP" when FSDP's variables chose the stage,
  // else "DEEPSPEED" (ZeRO's stages are DeepSpeed's names).
  std::string sharding_kind = "DEEPSPEED";
};

// The ACC_OPTIONS_ACCELERATOR keys.
const OptionTable<AcceleratorConfig>& accelerator_option_table();

// Precedence: an option the program set > ACCELERATE_USE_CPU / ACCELERATE_MIXED_PRECISION /
// ACCELERATE_GRADIENT_ACCUMULATION_STEPS > Accelerate's config file (use_cpu, mixed_precision,
// gradient_accumulation_steps; see config/config_file.h) > default. The file is read only when a
// value is still missing; one that is found but broken is an error naming it. (Accelerate lets the environment override the
// gradient_accumulation_steps argument; its docs say arguments win, and so do we.) A variable
// with a value that does not parse is an error naming it.
AcceleratorConfig resolve_accelerator_config(const Options& options);

// Whether a model built in this process gets placeholder weights (Model::make_weights_pending):
// the launcher's variables ask for FSDP's cpu_ram_efficient_loading or DeepSpeed's zero3_init_flag
// (what transformers' from_pretrained reads too) and this is not the main process (RANK > 0).
// Accelerate's ParallelismConfig: dp_shard_size x dp_replicate_size is the number of processes
// (or 1: not set).
void check_parallelism_world(const ShardingOptions& sharding, int64_t world_size);
// The settings every process of a job must share (how gradients are reduced, sharded, scaled and
// accumulated, how loaders shard), as "key=value" lines in the option table's order: processes
// that differ would pair mismatched collectives. Paths, trackers, seeds and timeouts may differ.
std::string settings_every_process_shares(const AcceleratorConfig& config);

bool builds_placeholder_weights();
// Whether the launcher's variables ask for that, on any process.
bool main_process_loads_weights();

}  // namespace acc

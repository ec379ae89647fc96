#include "accelerator/config.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/error.h"
#include "common/options.h"
#include "common/text.h"
#include "config/config_file.h"
#include "config/parallelism_config.h"
#include "config/sharding_config.h"
#include "parallel/ignored_modules.h"
#include "state/process_env.h"

namespace acc {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// The config file the library reads (implicit_config), read once by each caller.
using ConfigFile = std::function<std::optional<ClusterConfig>()>;

// A launcher variable: the environment's, else, where no launcher said whether to use FSDP or
// DeepSpeed (Accelerate's and ours always do), what the config file's fsdp_config / deepspeed_config
// stand for: what our launcher would have set from it, for a process started by torchrun, mpirun or a
// script with ACCELERATE_CONFIG_FILE. `config_file` empty: the environment only (a program that chose
// its zero_stage reads no file for it).
VariableLookup launcher_variables(const ConfigFile& config_file) {
  std::map<std::string, std::string> file;
  if (config_file && !env("ACCELERATE_USE_FSDP") && !env("ACCELERATE_USE_DEEPSPEED"))
    if (const auto config = config_file()) file = config->sharding_env;
  return [file = std::move(file)](const char* name) -> std::optional<std::string> {
    if (auto value = env(name)) return value;
    const auto found = file.find(name);
    if (found == file.end()) return std::nullopt;
    return found->second;
  };
}

// What Accelerate's launcher passes for features this runtime does not build is refused, rather than
// trained as something else: Megatron-LM, and the parallelism config's dimensions beyond data
// parallelism (tensor, context, sequence parallelism).
void refuse_unbuilt_launcher_features(const VariableLookup& variables) {
  auto is_true = [&](const char* name) {
    const auto value = variables(name);
    return value && parse_bool(*value).value_or(false);
  };
  if (is_true("ACCELERATE_USE_MEGATRON_LM"))
    fail(Status::Unsupported, "environment variable ACCELERATE_USE_MEGATRON_LM=true (Accelerate's launcher for a ",
         "MEGATRON_LM config): Megatron-LM is Python-only and not built here");
  if (!is_true("ACCELERATE_USE_PARALLELISM_CONFIG")) return;
  for (const char* name : {"PARALLELISM_CONFIG_TP_SIZE", "PARALLELISM_CONFIG_CP_SIZE", "PARALLELISM_CONFIG_SP_SIZE"}) {
    const auto value = variables(name);
    if (value && *value != "1")
      fail(
          Status::Unsupported, "environment variable ", name, "=", *value, " (Accelerate's parallelism_config): ",
          "only its data-parallel dimensions (PARALLELISM_CONFIG_DP_SHARD_SIZE, PARALLELISM_CONFIG_DP_REPLICATE_SIZE) ",
          "are built here");
  }
}

// The data-parallel sizes Accelerate's launcher passes (0: none), each an integer >= 1 as its
// ParallelismConfig requires; shard groups only under its FSDP 2 (its FSDP 1 never reads the mesh,
// and shards over every process).
struct ParallelismSizes {
  int64_t shard = 0, replicate = 0;
};
ParallelismSizes launcher_parallelism_sizes(const VariableLookup& variables) {
  ParallelismSizes sizes;
  const auto use = variables("ACCELERATE_USE_PARALLELISM_CONFIG");
  if (!use || !parse_bool(*use).value_or(false)) return sizes;
  for (auto [name, size] : {std::pair<const char*, int64_t*>{"PARALLELISM_CONFIG_DP_SHARD_SIZE", &sizes.shard},
                            {"PARALLELISM_CONFIG_DP_REPLICATE_SIZE", &sizes.replicate}}) {
    const auto value = variables(name);
    if (!value) continue;
    const auto parsed = parse_integer(*value);
    require(parsed && *parsed >= 1, "environment variable ", name, "='", *value, "': must be an integer >= 1");
    *size = *parsed;
  }
  require(sizes.shard <= 1 || launches_fsdp2(variables), "environment variable PARALLELISM_CONFIG_DP_SHARD_SIZE='",
          sizes.shard,
          "' shards the model in groups: it needs FSDP version 2 (ACCELERATE_USE_FSDP=true, FSDP_VERSION=2), as ",
          "Accelerate's FSDP 1 never reads the parallelism config");
  return sizes;
}

// Accelerate's ParallelismConfig's data-parallel dimensions, as far as they can be checked before
// the number of processes is known (check_parallelism_world checks that).
void check_parallelism_sizes(const ShardingOptions& s) {
  require(s.dp_shard_size <= 1 || s.stage > 0, "dp_shard_size ", s.dp_shard_size, " shards the model: it needs ",
          "zero_stage 1, 2 or 3 (an FSDP config), not 0 (DDP)");
  require(s.dp_shard_size <= 1 || !s.hybrid, "dp_shard_size ", s.dp_shard_size, " and hybrid_shard both say whom ",
          "each process shards with: use one (hybrid_shard: the processes of each machine)");
  // Accelerate's FSDP2 takes its mesh's dp_shard dimension: with replicas only it has none.
  require(s.dp_replicate_size <= 1 || s.dp_shard_size > 1 || s.stage == 0, "dp_replicate_size ", s.dp_replicate_size,
          " under zero_stage ", s.stage, " needs dp_shard_size > 1 (the processes sharing ",
          "each replica); replicas alone are DDP (zero_stage 0)");
}

// Accelerate's launcher variables for FSDP and DeepSpeed (or the config file's), for the
// sharding options the program did not set.
// `from_env`: what the variables and the config file set (a DeepSpeed JSON config must agree with them).
std::optional<ShardingRequest> read_sharding_env(const VariableLookup& variables, const Options& o,
                                                const Options& from_env, AcceleratorConfig& c) {
  const auto request = sharding_from_environment(variables);
  if (!request) return request;
  if (!o.has("zero_stage")) {
    c.sharding.stage = request->stage;
    c.sharding_kind = request->kind;
  }
  // The program's zero_stage 0 turns sharding off, the launcher's offload, ignored modules and hybrid
  // strategy with it. (The launcher's own stage 0, FSDP's NO_SHARD, with offload or ignored modules
  // stays a contradiction, refused below: Accelerate's NO_SHARD FSDP would honour them.)
  const bool keeps_sharding_settings = !o.has("zero_stage") || c.sharding.stage > 0;
  if (!o.has("offload_optimizer")) c.sharding.offload_optimizer = request->offload_optimizer && keeps_sharding_settings;
  if (!o.has("offload_params")) c.sharding.offload_params = request->offload_params && keeps_sharding_settings;
  if (!o.has("hybrid_shard")) c.sharding.hybrid = request->hybrid && c.sharding.stage > 0;
  if (!o.has("state_dict_type") && request->state_dict_type) c.sharding.state_dict_type = *request->state_dict_type;
  if (!o.has("transformer_cls_to_wrap") && request->transformer_cls_to_wrap)
    c.sharding.transformer_cls_to_wrap = *request->transformer_cls_to_wrap;
  if (!o.has("ignored_modules") && request->ignored_modules && keeps_sharding_settings)
    c.sharding.ignored_modules = *request->ignored_modules;
  if (!o.has("auto_wrap_policy") && request->auto_wrap_policy) c.sharding.auto_wrap_policy = request->auto_wrap_policy;
  if (!o.has("min_num_params") && request->min_num_params) c.sharding.min_num_params = *request->min_num_params;
  if (!o.has("activation_checkpointing")) c.sharding.activation_checkpointing = request->activation_checkpointing;
  if (!o.has("zero3_save_16bit_model")) c.sharding.save_16bit_model = request->save_16bit_model;
  // A DeepSpeed JSON config's other settings: under the program's options; the variables and the
  // config file must agree with them (Accelerate refuses such pairs too).
  auto agreed = [&](const char* key, auto mine, auto theirs) {
    require(o.has(key) || !from_env.has(key) || mine == theirs, key, " ", mine, " (from ACCELERATE_* variables or the ",
            "config file) contradicts the DeepSpeed config's ", theirs);
    return o.has(key) ? mine : theirs;
  };
  if (request->gradient_accumulation_steps)
    c.gradient_accumulation_steps =
        agreed("gradient_accumulation_steps", c.gradient_accumulation_steps, *request->gradient_accumulation_steps);
  if (request->gradient_clipping) c.gradient_clipping = agreed("gradient_clipping", c.gradient_clipping, *request->gradient_clipping);
  for (const auto& dtype : request->disabled_precisions)
    require(c.mixed_precision != dtype, "mixed_precision \"", dtype, "\" contradicts the DeepSpeed config's ", dtype,
            ".enabled false");
  if (!o.has("scaler_init_scale") && request->scaler_init_scale) c.scaler.init_scale = *request->scaler_init_scale;
  if (!o.has("scaler_growth_interval") && request->scaler_growth_interval)
    c.scaler.growth_interval = *request->scaler_growth_interval;
  if (!o.has("scaler_hysteresis") && request->scaler_hysteresis) c.scaler.hysteresis = *request->scaler_hysteresis;
  if (!o.has("scaler_consecutive_hysteresis") && request->scaler_consecutive_hysteresis)
    c.scaler.consecutive_hysteresis = *request->scaler_consecutive_hysteresis;
  if (!o.has("scaler_min_scale") && request->scaler_min_scale) c.scaler.min_scale = *request->scaler_min_scale;
  if (request->mixed_precision) {
    // As Accelerate: the file's dtype wins over "no", and another one is a contradiction.
    require(c.mixed_precision == "no" || c.mixed_precision == *request->mixed_precision, "mixed_precision \"",
            c.mixed_precision, "\" contradicts the DeepSpeed config's ", *request->mixed_precision, ".enabled true");
    c.mixed_precision = *request->mixed_precision;
  }
  return request;
}

// Under DeepSpeed, Accelerate trains fp16 with DeepSpeed's loss scaler, whose defaults differ from
// GradScaler's: a window of 1000 good steps, hysteresis 2, a minimum scale of 1 (the initial scale,
// 2^16, is the same). Applied where the program, the variables and the DeepSpeed config left them.
void use_deepspeed_loss_scaler_defaults(const Options& o, const std::optional<ShardingRequest>& request,
                                        AcceleratorConfig& c) {
  if (c.sharding.stage == 0 || c.sharding_kind != "DEEPSPEED" || c.mixed_precision != "fp16") return;
  if (!o.has("scaler_growth_interval") && !(request && request->scaler_growth_interval)) c.scaler.growth_interval = 1000;
  if (!o.has("scaler_hysteresis") && !(request && request->scaler_hysteresis)) c.scaler.hysteresis = 2;
  if (!o.has("scaler_min_scale") && !(request && request->scaler_min_scale)) c.scaler.min_scale = 1;
}

}  // namespace

const OptionTable<AcceleratorConfig>& accelerator_option_table() {
  using C = AcceleratorConfig;
  static const OptionTable<C> table(OptionsKind::Accelerator, [](OptionTable<C>& t) {
    t.bind("cpu", "run on the CPU even where CUDA is there", &C::cpu);
    t.bind("mixed_precision", "autocast dtype of forward passes", &C::mixed_precision).one_of(mixed_precision_choices());
    t.bind("gradient_accumulation_steps", "micro-steps per optimizer step", &C::gradient_accumulation_steps).at_least(1);
    // GradientAccumulationPlugin.
    t.bind("sync_with_dataloader", "a prepared loader's last batch ends the window", &C::sync_with_dataloader);
    t.bind("sync_each_batch", "allreduce gradients on every micro-step", &C::sync_each_batch);
    t.bind("seed", "acc_set_seed at creation", &C::seed).at_least(0);
    t.bind("device_placement", "prepare moves objects to the device", &C::device_placement);
    t.bind("step_scheduler_with_optimizer", "a prepared scheduler steps once per process", &C::step_scheduler_with_optimizer);
    t.bind("split_batches", "a loader's batch is cut between processes", &C::split_batches);
    // ProjectConfiguration.
    t.bind("project_dir", "where checkpoints and logs go", &C::project_dir);
    t.bind("logging_dir", "where trackers write; empty: project_dir", &C::logging_dir);
    t.bind("automatic_checkpoint_naming", "save_state without a folder writes checkpoint_<iteration>",
           &C::automatic_checkpoint_naming);
    t.bind("total_limit", "checkpoints kept by rotation (0 or less: only the newest)", &C::total_limit);
    t.bind("iteration", "the next automatic checkpoint's number", &C::iteration).at_least(0);
    t.bind("save_on_each_node", "shared files on every node's local main process", &C::save_on_each_node);
    t.bind("python_state_files",
           "save_state also writes optimizer.bin, scheduler.bin, scaler.pt and random_states_<rank>.pkl",
           &C::python_state_files);
    t.bind("log_with", "trackers: tensorboard, jsonl, csv, mlflow, dvclive, trackio, all or a comma-separated list",
           &C::log_with);
    t.bind("even_batches", "the last round is completed from the epoch's start", &C::even_batches);
    t.bind("dispatch_batches", "process 0 reads and sends each process its slice", &C::dispatch_batches);
    t.bind("data_seed", "with use_seedable_sampler: the seed of prepared shuffling loaders that have none",
           &C::data_seed)
        .at_least(0);
    t.bind("use_seedable_sampler", "unseeded shuffling uses data_seed, else torch's initial seed, + epoch",
           &C::use_seedable_sampler);
    t.bind("non_blocking", "batches go to a GPU asynchronously", &C::non_blocking);
    // GradScalerKwargs.
    t.bind("scaler_enabled", "fp16: scale the loss (false: fp16 autocast alone)", &C::scaler,
           &GradScalerOptions::enabled);
    t.bind("scaler_init_scale", "fp16: the first loss scale", &C::scaler, &GradScalerOptions::init_scale).at_least(0);
    t.bind("scaler_growth_factor", "fp16: scale growth after good steps", &C::scaler, &GradScalerOptions::growth_factor)
        .at_least(1);
    t.bind("scaler_backoff_factor", "fp16: scale back-off after an overflow", &C::scaler,
           &GradScalerOptions::backoff_factor)
        .at_least(0)
        .at_most(1);
    t.bind("scaler_growth_interval", "fp16: good steps before the scale grows", &C::scaler,
           &GradScalerOptions::growth_interval)
        .at_least(1);
    // DeepSpeed's DynamicLossScaler (the defaults under zero_stage > 0 with DeepSpeed's settings).
    t.bind("scaler_hysteresis", "fp16: overflows before the scale backs off", &C::scaler, &GradScalerOptions::hysteresis)
        .at_least(1);
    t.bind("scaler_consecutive_hysteresis", "fp16: a good step restores the hysteresis", &C::scaler,
           &GradScalerOptions::consecutive_hysteresis);
    t.bind("scaler_min_scale", "fp16: the lowest loss scale (0: none)", &C::scaler, &GradScalerOptions::min_scale)
        .at_least(0);
    t.bind("gradient_clipping", "DeepSpeed's: prepared optimizers clip to this norm first", &C::gradient_clipping)
        .at_least(0);
    // At most 100 years: c10d counts milliseconds in 64 bits.
    t.bind("timeout_seconds", "rendezvous and every collective", &C::timeout_seconds).at_least(1).at_most(3153600000);
    // InitProcessGroupKwargs(backend=...); unset: nccl on CUDA, gloo on the CPU.
    t.bind("backend", "the process group's backend", &C::backend).one_of({"gloo", "nccl"});
    // DistributedDataParallelKwargs.
    // At most what a byte count holds (bucket_cap_mb * 2^20 < 2^63).
    t.bind("ddp_bucket_cap_mb", "DDP's gradient bucket size", &C::ddp, &DataParallelOptions::bucket_cap_mb)
        .at_least(1)
        .at_most(static_cast<double>((int64_t{1} << 43) - 1));
    t.bind("ddp_find_unused_parameters", "DDP tolerates parameters without gradients", &C::ddp,
           &DataParallelOptions::find_unused_parameters);
    t.bind("ddp_broadcast_buffers", "buffers from rank 0 before each forward", &C::ddp,
           &DataParallelOptions::broadcast_buffers);
    t.bind("ddp_gradient_as_bucket_view", "gradients are views into DDP's buckets", &C::ddp,
           &DataParallelOptions::gradient_as_bucket_view);
    t.bind("ddp_static_graph", "the same parameters get gradients in the same order every step", &C::ddp,
           &DataParallelOptions::static_graph);
    t.bind("ddp_comm_hook", "gradients travel compressed", &C::ddp, &DataParallelOptions::comm_hook)
        .one_of({"no", "fp16", "bf16", "power_sgd", "batched_power_sgd"});
    t.bind("ddp_comm_wrapper", "PowerSGD on a 16-bit copy of each bucket", &C::ddp, &DataParallelOptions::comm_wrapper)
        .one_of({"no", "fp16", "bf16"});
    t.bind("ddp_comm_state_option", "PowerSGDState's arguments (a JSON object)", &C::ddp,
           &DataParallelOptions::comm_state_option);
    // Sharded data parallelism (DeepSpeed's ZeRO stage; FSDP's strategies map onto it).
    t.bind("zero_stage", "0: DDP; 1-3 shard optimizer state, gradients, parameters", &C::sharding,
           &ShardingOptions::stage)
        .at_least(0)
        .at_most(3);
    t.bind("offload_optimizer", "sharded optimizer state in CPU memory", &C::sharding,
           &ShardingOptions::offload_optimizer);
    t.bind("offload_params", "stage 3 parameter shards in CPU memory", &C::sharding, &ShardingOptions::offload_params);
    t.bind("hybrid_shard", "shard within each machine, replicate across machines", &C::sharding,
           &ShardingOptions::hybrid);
    t.bind("dp_shard_size", "processes sharing one copy of the model (ParallelismConfig; 0: all)", &C::sharding,
           &ShardingOptions::dp_shard_size)
        .at_least(0);
    t.bind("dp_replicate_size", "groups of dp_shard_size processes holding replicas (ParallelismConfig)", &C::sharding,
           &ShardingOptions::dp_replicate_size)
        .at_least(0);
    t.bind("auto_wrap_policy", "which modules are stage 3's units", &C::sharding, &ShardingOptions::auto_wrap_policy)
        .one_of(auto_wrap_policies());
    t.bind("min_num_params", "SIZE_BASED_WRAP: parameters a module needs to be a unit", &C::sharding,
           &ShardingOptions::min_num_params)
        .at_least(0);
    t.bind("transformer_cls_to_wrap", "stage 3 units: the modules of these classes", &C::sharding,
           &ShardingOptions::transformer_cls_to_wrap);
    t.bind("ignored_modules", "modules (a regular expression of names) kept whole, not sharded", &C::sharding,
           &ShardingOptions::ignored_modules);
    t.bind("activation_checkpointing", "recompute the wrap policy's modules in backward", &C::sharding,
           &ShardingOptions::activation_checkpointing);
    t.bind("state_dict_type", "consolidated or per-process checkpoints", &C::sharding, &ShardingOptions::state_dict_type)
        .one_of({"FULL_STATE_DICT", "SHARDED_STATE_DICT"});
    t.bind("zero3_save_16bit_model", "stage 3 saves weights in the bf16/fp16 of mixed_precision", &C::sharding,
           &ShardingOptions::save_16bit_model);
  });
  return table;
}

namespace {

// DistributedDataParallelKwargs' hook settings that would do nothing are refused (Accelerate ignores
// a wrapper or a state without a PowerSGD hook, and every hook under FSDP or DeepSpeed).
void check_comm_hook(AcceleratorConfig& c) {
  DataParallelOptions& ddp = c.ddp;
  if (ddp.comm_wrapper != "no" && !ddp.uses_power_sgd())
    fail(Status::Unsupported, "ddp_comm_wrapper ", ddp.comm_wrapper, " wraps PowerSGD: it needs ddp_comm_hook ",
         "power_sgd or batched_power_sgd, not ", ddp.comm_hook);
  if (!ddp.comm_state_option.empty() && !ddp.uses_power_sgd())
    fail(Status::InvalidArgument, "ddp_comm_state_option sets PowerSGD's state: it needs ddp_comm_hook power_sgd or ",
         "batched_power_sgd, not ", ddp.comm_hook);
  ddp.power_sgd = parse_power_sgd_settings(ddp.comm_state_option);
  if (ddp.comm_hook != "no" && c.sharding.stage > 0)
    fail(Status::Unsupported, "ddp_comm_hook ", ddp.comm_hook, " is a hook of DDP's gradient allreduce: sharded ",
         "data parallelism (zero_stage ", c.sharding.stage, ") reduce-scatters gradients without it");
}

}  // namespace

AcceleratorConfig resolve_accelerator_config(const Options& o) {
  require(o.kind() == OptionsKind::Accelerator, "accelerator options must be of kind accelerator, got ",
          options_kind_name(o.kind()));
  const auto& table = accelerator_option_table();
  // Environment values go through a scratch Options object, so they are checked like options.
  Options from_env(table);
  // Accelerate's config file comes last: read only when a value is still missing.
  std::optional<std::optional<ClusterConfig>> file;
  const ConfigFile config_file = [&file] {
    if (!file) file = implicit_config();
    return *file;
  };
  auto from_file = [&](const char* key) -> std::optional<std::string> {
    static const std::set<std::string> filed = {"cpu", "mixed_precision", "gradient_accumulation_steps"};
    if (!filed.count(key)) return std::nullopt;  // the file is read only for what it can give
    config_file();
    if (!*file) return std::nullopt;
    const ClusterConfig& f = **file;
    if (std::string(key) == "cpu" && f.says_cpu()) return f.wants_cpu() ? "true" : "false";
    if (std::string(key) == "mixed_precision" && f.present.count("mixed_precision")) return f.mixed_precision;
    if (std::string(key) == "gradient_accumulation_steps" && f.gradient_accumulation_steps)
      return std::to_string(*f.gradient_accumulation_steps);
    return std::nullopt;
  };
  // `unset`: a value that means none (Accelerate's launcher writes "auto" for no clipping).
  const VariableLookup variables = launcher_variables(o.has("zero_stage") ? ConfigFile() : config_file);
  refuse_unbuilt_launcher_features(variables);
  auto take = [&](const char* key, const char* variable, const char* unset = nullptr) {
    if (o.has(key)) return;
    if (auto value = variables(variable); value && !(unset && *value == unset)) {
      try {
        from_env.set_from_text(key, *value);
      } catch (const Error& e) {
        fail(Status::InvalidArgument, "environment variable ", variable, "='", *value, "': ", e.what());
      }
    } else if (auto filed = from_file(key)) {
      from_env.set_from_text(key, *filed);  // the file's values were checked when it was read
    }
  };
  take("cpu", "ACCELERATE_USE_CPU");
  take("mixed_precision", "ACCELERATE_MIXED_PRECISION");
  take("gradient_accumulation_steps", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS");
  take("gradient_clipping", "ACCELERATE_GRADIENT_CLIPPING", "auto");
  const ParallelismSizes launched = launcher_parallelism_sizes(variables);

  AcceleratorConfig c;
  table.copy(from_env, c);
  table.copy(o, c);  // the program's options win
  if (c.logging_dir.empty()) c.logging_dir = c.project_dir;
  const auto sharding_request = read_sharding_env(variables, o, from_env, c);
  use_deepspeed_loss_scaler_defaults(o, sharding_request, c);
  // Hybrid sharding without a stage would train plain DDP: say so rather than do it.
  require(!c.sharding.hybrid || c.sharding.stage > 0,
          "hybrid_shard shards within each machine: it needs zero_stage 1, 2 or 3, not 0 (DDP)");
  // The launcher's sizes where the program set none (0 is none), except that the program's zero_stage
  // 0 is DDP: the launcher's shard groups go with the launcher's sharding.
  if (!(o.has("zero_stage") && c.sharding.stage == 0)) {
    if (c.sharding.dp_shard_size == 0) c.sharding.dp_shard_size = launched.shard;
    if (c.sharding.dp_replicate_size == 0) c.sharding.dp_replicate_size = launched.replicate;
  }
  check_parallelism_sizes(c.sharding);
  // So would offloading without a sharded optimizer to offload (DeepSpeed's stage 0, FSDP's NO_SHARD).
  require(!(c.sharding.offload_optimizer || c.sharding.offload_params) || c.sharding.stage > 0,
          "offload_optimizer and offload_params offload what sharding keeps: they need zero_stage 1, 2 or 3, not 0 (DDP)");
  require(c.sharding.ignored_modules.empty() || c.sharding.stage > 0,
          "ignored_modules keeps modules out of sharding: it needs zero_stage 1, 2 or 3, not 0 (DDP)");
  check_module_pattern(c.sharding.ignored_modules);
  check_comm_hook(c);
  return c;
}

void check_parallelism_world(const ShardingOptions& s, int64_t world_size) {
  const int64_t total = std::max<int64_t>(s.dp_shard_size, 1) * std::max<int64_t>(s.dp_replicate_size, 1);
  require(total == 1 || total == world_size, "dp_shard_size ", std::max<int64_t>(s.dp_shard_size, 1),
          " x dp_replicate_size ", std::max<int64_t>(s.dp_replicate_size, 1), " = ", total,
          " processes, but the job has ", world_size, " (as Accelerate's ParallelismConfig, they must match)");
}

std::string settings_every_process_shares(const AcceleratorConfig& config) {
  static const std::set<std::string> own = {"cpu",          "seed",        "device_placement", "project_dir",
                                            "logging_dir",  "log_with",    "automatic_checkpoint_naming",
                                            "total_limit",  "iteration",   "save_on_each_node",
                                            "non_blocking", "timeout_seconds", "step_scheduler_with_optimizer"};
  const auto& table = accelerator_option_table();
  std::string lines;
  for (const auto& spec : table.specs) {
    if (own.count(spec.key)) continue;
    const auto value = table.value(config, spec.key);
    lines += spec.key + "=" + (value ? to_text(*value) : std::string("(unset)")) + "\n";
  }
  return lines;
}

bool main_process_loads_weights() {
  try {
    const auto request = sharding_from_environment(launcher_variables(implicit_config));
    return request && request->main_process_loads;
  } catch (const Error&) {
    return false;  // a malformed variable: the accelerator names it when made; a model is built whole
  }
}

bool builds_placeholder_weights() {
  try {
    return main_process_loads_weights() && detect_process_env().rank > 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace acc

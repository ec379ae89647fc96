#include "accelerator/config.h"

#include <cstdlib>

#include "common/error.h"
#include "common/options.h"
#include "config/config_file.h"

namespace acc {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

bool env_true(const char* name) {
  auto value = env(name);
  if (!value) return false;
  auto flag = parse_bool(*value);
  require(flag.has_value(), "environment variable ", name, "='", *value, "' is not true or false");
  return *flag;
}

// Accelerate's launcher variables for FSDP and DeepSpeed (accelerate-launch sets them from the config
// file or its flags), for the sharding options the program did not set. A value this runtime cannot
// honour is an error naming the variable, never a fallback to DDP.
void read_sharding_env(const Options& o, AcceleratorConfig& c) {
  auto unsupported = [](const char* name, const std::string& value, const char* why) {
    fail(Status::Unsupported, "environment variable ", name, "='", value, "': ", why);
  };
  int64_t stage = 0;
  bool offload_optimizer = false, offload_params = false;
  std::optional<std::string> state_dict_type;
  if (env_true("ACCELERATE_USE_FSDP")) {
    // FSDP2 (FSDP_VERSION=2) says whether parameters are freed after forward instead.
    const bool fsdp2 = env("FSDP_VERSION").value_or("1") == "2";
    const bool reshard = !env("FSDP_RESHARD_AFTER_FORWARD") || env_true("FSDP_RESHARD_AFTER_FORWARD");
    const std::string strategy =
        fsdp2 ? (reshard ? "FULL_SHARD" : "SHARD_GRAD_OP") : env("FSDP_SHARDING_STRATEGY").value_or("FULL_SHARD");
    if (strategy == "FULL_SHARD" || strategy == "1") stage = 3;
    else if (strategy == "SHARD_GRAD_OP" || strategy == "2") stage = 2;
    else if (strategy == "NO_SHARD" || strategy == "3") stage = 0;
    else if (strategy == "HYBRID_SHARD" || strategy == "4" || strategy == "HYBRID_SHARD_ZERO2" || strategy == "5")
      unsupported("FSDP_SHARDING_STRATEGY", strategy, "hybrid sharding (within a node, replicated across nodes) is not implemented");
    else
      fail(Status::InvalidArgument, "environment variable FSDP_SHARDING_STRATEGY='", strategy,
           "' is not FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD");
    offload_params = offload_optimizer = env_true("FSDP_OFFLOAD_PARAMS");
    if (auto type = env("FSDP_STATE_DICT_TYPE")) {
      if (*type == "LOCAL_STATE_DICT")
        unsupported("FSDP_STATE_DICT_TYPE", *type, "use FULL_STATE_DICT or SHARDED_STATE_DICT");
      require(*type == "FULL_STATE_DICT" || *type == "SHARDED_STATE_DICT", "environment variable FSDP_STATE_DICT_TYPE='",
              *type, "' is not FULL_STATE_DICT or SHARDED_STATE_DICT");
      state_dict_type = *type;
    }
    if (auto policy = env("FSDP_AUTO_WRAP_POLICY"); policy && *policy != "TRANSFORMER_BASED_WRAP")
      unsupported("FSDP_AUTO_WRAP_POLICY", *policy,
                  "units are fixed: a spec model's layers, a TorchScript model whole (TRANSFORMER_BASED_WRAP is accepted)");
  } else if (env_true("ACCELERATE_USE_DEEPSPEED")) {
    const std::string text = env("ACCELERATE_DEEPSPEED_ZERO_STAGE").value_or("2");  // DeepSpeedPlugin's default
    require(text.size() == 1 && text[0] >= '0' && text[0] <= '3', "environment variable ACCELERATE_DEEPSPEED_ZERO_STAGE='",
            text, "' is not 0, 1, 2 or 3");
    stage = text[0] - '0';
    auto device = [&](const char* name) {
      const std::string value = env(name).value_or("none");
      if (value == "nvme") unsupported(name, value, "NVMe offload is not implemented (none or cpu)");
      require(value == "none" || value == "cpu", "environment variable ", name, "='", value, "' is not none or cpu");
      return value == "cpu";
    };
    if (auto file = env("ACCELERATE_DEEPSPEED_CONFIG_FILE"); file && *file != "none")
      unsupported("ACCELERATE_DEEPSPEED_CONFIG_FILE", *file,
                  "DeepSpeed's JSON config is not read (set zero_stage and offload_*_device)");
    offload_optimizer = device("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE");
    offload_params = device("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE");
  } else {
    return;
  }
  if (!o.has("zero_stage")) {
    c.zero_stage = stage;
    c.sharding_kind = env_true("ACCELERATE_USE_FSDP") ? "FSDP" : "DEEPSPEED";
  }
  if (!o.has("offload_optimizer")) c.offload_optimizer = offload_optimizer;
  if (!o.has("offload_params")) c.offload_params = offload_params;
  if (!o.has("state_dict_type") && state_dict_type) c.state_dict_type = *state_dict_type;
}

}  // namespace

AcceleratorConfig resolve_accelerator_config(const Options& o) {
  require(o.kind() == OptionsKind::Accelerator, "accelerator options must be of kind accelerator, got ",
          options_kind_name(o.kind()));
  // Environment values go through a scratch Options object, so they are checked like options.
  Options from_env(OptionsKind::Accelerator);
  // Accelerate's config file comes last: read only when a value is still missing.
  std::optional<std::optional<ClusterConfig>> file;
  auto from_file = [&](const char* key) -> std::optional<std::string> {
    if (!file) file = implicit_config();
    if (!*file) return std::nullopt;
    const ClusterConfig& f = **file;
    if (std::string(key) == "cpu" && f.says_cpu()) return f.wants_cpu() ? "true" : "false";
    if (std::string(key) == "mixed_precision" && f.present.count("mixed_precision")) return f.mixed_precision;
    if (std::string(key) == "gradient_accumulation_steps" && f.gradient_accumulation_steps)
      return std::to_string(*f.gradient_accumulation_steps);
    return std::nullopt;
  };
  auto take = [&](const char* key, const char* variable) {
    if (o.has(key)) return;
    if (auto value = env(variable)) {
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
  auto pick = [&](const char* key) -> const Options& { return o.has(key) ? o : from_env; };

  AcceleratorConfig c;
  c.cpu = pick("cpu").get_bool("cpu");
  c.mixed_precision = pick("mixed_precision").get_string("mixed_precision");
  c.gradient_accumulation_steps = pick("gradient_accumulation_steps").get_int("gradient_accumulation_steps");
  c.sync_with_dataloader = o.get_bool("sync_with_dataloader");
  c.sync_each_batch = o.get_bool("sync_each_batch");
  if (o.has("seed")) c.seed = static_cast<uint64_t>(o.get_int("seed"));
  c.device_placement = o.get_bool("device_placement");
  c.step_scheduler_with_optimizer = o.get_bool("step_scheduler_with_optimizer");
  c.split_batches = o.get_bool("split_batches");
  c.project_dir = o.get_string("project_dir");
  c.logging_dir = o.get_string("logging_dir");
  if (c.logging_dir.empty()) c.logging_dir = c.project_dir;
  c.automatic_checkpoint_naming = o.get_bool("automatic_checkpoint_naming");
  if (o.has("total_limit")) c.total_limit = o.get_int("total_limit");
  c.iteration = o.get_int("iteration");
  c.save_on_each_node = o.get_bool("save_on_each_node");
  c.log_with = o.get_string("log_with");
  c.even_batches = o.get_bool("even_batches");
  if (o.has("dispatch_batches")) c.dispatch_batches = o.get_bool("dispatch_batches");
  if (o.has("data_seed")) c.data_seed = static_cast<uint64_t>(o.get_int("data_seed"));
  c.use_seedable_sampler = o.get_bool("use_seedable_sampler");
  c.non_blocking = o.get_bool("non_blocking");
  c.scaler_init_scale = o.get_double("scaler_init_scale");
  c.scaler_growth_factor = o.get_double("scaler_growth_factor");
  c.scaler_backoff_factor = o.get_double("scaler_backoff_factor");
  c.scaler_growth_interval = o.get_int("scaler_growth_interval");
  c.timeout_seconds = o.get_int("timeout_seconds");
  if (o.has("backend")) c.backend = o.get_string("backend");
  c.ddp_bucket_cap_mb = o.get_int("ddp_bucket_cap_mb");
  c.ddp_find_unused_parameters = o.get_bool("ddp_find_unused_parameters");
  c.ddp_broadcast_buffers = o.get_bool("ddp_broadcast_buffers");
  c.ddp_comm_hook = o.get_string("ddp_comm_hook");
  c.zero_stage = o.get_int("zero_stage");
  c.offload_optimizer = o.get_bool("offload_optimizer");
  c.offload_params = o.get_bool("offload_params");
  c.state_dict_type = o.get_string("state_dict_type");
  read_sharding_env(o, c);
  return c;
}

}  // namespace acc

#include "accelerator/config.h"

#include <cstdlib>

#include "common/error.h"
#include "common/options.h"
#include "config/config_file.h"
#include "config/sharding_config.h"

namespace acc {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// Accelerate's launcher variables for FSDP and DeepSpeed (config/sharding_config.h), for the
// sharding options the program did not set.
void read_sharding_env(const Options& o, AcceleratorConfig& c) {
  const auto request = sharding_from_environment(env);
  if (!request) return;
  if (!o.has("zero_stage")) {
    c.zero_stage = request->stage;
    c.sharding_kind = request->kind;
  }
  if (!o.has("offload_optimizer")) c.offload_optimizer = request->offload_optimizer;
  if (!o.has("offload_params")) c.offload_params = request->offload_params;
  if (!o.has("state_dict_type") && request->state_dict_type) c.state_dict_type = *request->state_dict_type;
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

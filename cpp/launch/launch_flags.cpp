#include "launch/launch_flags.h"

#include "common/error.h"
#include "config/parallelism_config.h"
#include "config/sharding_config.h"

namespace acc {

LaunchConfig resolve_launch_config(const LaunchFlags& f, const std::optional<ClusterConfig>& file,
                                   const std::optional<std::string>& config_path, std::vector<std::string> command) {
  // Accelerate's checks: one kind of job at a time, and --multi_gpu means more than one process.
  require(int(f.cpu) + int(f.multi_gpu) + int(f.use_fsdp) + int(f.use_deepspeed) <= 1,
          "only one of --cpu, --multi_gpu, --use_fsdp and --use_deepspeed can be given");
  require(!f.multi_gpu || !f.num_processes || *f.num_processes >= 2, "--multi_gpu needs at least 2 processes, got ",
          "--num_processes ", f.num_processes.value_or(0));
  LaunchConfig c;
  if (file) {
    c.num_processes = file->num_processes;
    // distributed_type NO is one process whatever num_processes says, as Accelerate's launcher runs it
    // (its simple launcher); --num_processes still asks for more.
    if (file->distributed_type == "NO" && file->num_processes > 1) {
      c.num_processes = 1;
      if (!f.num_processes)
        c.warnings.push_back(config_path.value_or("the config file") + " says distributed_type NO with num_processes " +
                             std::to_string(file->num_processes) + ": one process is launched");
    }
    c.num_machines = file->num_machines;
    c.machine_rank = file->machine_rank;
    if (file->main_process_ip) c.main_process_ip = *file->main_process_ip;
    c.main_process_port = file->main_process_port;
    c.mixed_precision = file->mixed_precision;
    c.gradient_accumulation_steps = file->gradient_accumulation_steps;
    c.cpu = file->wants_cpu();
    c.debug = file->debug;
    c.cpu_affinity = file->enable_cpu_affinity;
    if (file->gpu_ids && *file->gpu_ids != "all") c.gpu_ids = file->gpu_ids;
    c.config_file = config_path;
    // The file's FSDP or DeepSpeed applies unless a flag names the kind of job (as Accelerate's
    // launcher takes the file's distributed_type only then); --cpu never shards there.
    if (!f.multi_gpu && !f.cpu) c.sharding_env = file->sharding_env;
  }
  if (f.num_processes) c.num_processes = *f.num_processes;
  require(c.num_processes != -1, config_path.value_or("the config file"), " leaves num_processes unset (-1, or ",
          "missing): pass --num_processes");
  if (f.num_machines) c.num_machines = *f.num_machines;
  if (f.machine_rank) c.machine_rank = *f.machine_rank;
  if (f.main_process_ip) c.main_process_ip = *f.main_process_ip;
  if (f.main_process_port) c.main_process_port = *f.main_process_port;
  if (f.mixed_precision) c.mixed_precision = f.mixed_precision;
  if (f.gradient_accumulation_steps) c.gradient_accumulation_steps = f.gradient_accumulation_steps;
  if (f.cpu) c.cpu = true;
  if (f.multi_gpu) c.cpu = false;
  if (f.debug) c.debug = true;
  if (f.enable_cpu_affinity) c.cpu_affinity = true;
  if (f.gpu_ids) c.gpu_ids = *f.gpu_ids == "all" ? std::nullopt : f.gpu_ids;
  // Accelerate's check: a multi-GPU job on one machine names at least two GPUs (or all of them).
  const bool multi_gpu =
      f.multi_gpu || (file && file->distributed_type == "MULTI_GPU" && !f.cpu && !f.use_fsdp && !f.use_deepspeed);
  require(!multi_gpu || !c.gpu_ids || c.num_machines > 1 || c.gpu_ids->find(',') != std::string::npos, "gpu_ids ",
          c.gpu_ids.value_or(""), " names fewer than two GPUs for a multi-GPU job: give at least two ",
          "(--gpu_ids 0,1) or all");
  if (f.num_cpu_threads_per_process) c.num_cpu_threads_per_process = f.num_cpu_threads_per_process;
  if (f.max_restarts) c.max_restarts = *f.max_restarts;
  if (f.kill_timeout_seconds) c.kill_timeout_seconds = *f.kill_timeout_seconds;
  c.prefix_output = !f.no_prefix;
  if (f.monitor_interval_seconds) c.monitor_interval_seconds = *f.monitor_interval_seconds;
  if (f.tee) c.tee = *f.tee;
  if (f.redirects) c.redirects = *f.redirects;
  if (f.log_dir) c.log_dir = *f.log_dir;
  if (f.role) c.role = *f.role;
  // Machine 0's launcher hosts the store every process meets at (torchrun's static rendezvous).
  if (f.rdzv_backend && *f.rdzv_backend != "static")
    fail(Status::Unsupported, "--rdzv_backend ", *f.rdzv_backend, " is not supported: this launcher's rendezvous is ",
         "static (machine 0 hosts the store at --main_process_ip:--main_process_port); use torchrun for elastic jobs");
  require(!f.rdzv_conf || f.rdzv_conf->empty(), "--rdzv_conf configures an elastic rendezvous backend; with the ",
          "static one there is nothing to configure");
  // A sharding flag overrides the file's key by key (fsdp_config / deepspeed_config then the flags).
  auto given = [](const std::map<std::string, std::string>& flags) {
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : flags)
      if (!value.empty()) out[key] = value;
    return out;
  };
  const auto fsdp_flags = given(f.fsdp), deepspeed_flags = given(f.deepspeed);
  if (f.use_fsdp || f.use_deepspeed || !fsdp_flags.empty() || !deepspeed_flags.empty()) {
    const bool fsdp = f.use_fsdp || (!f.use_deepspeed && !fsdp_flags.empty());
    require(fsdp ? deepspeed_flags.empty() : fsdp_flags.empty(), "DeepSpeed and FSDP flags cannot be mixed");
    require(
        f.use_fsdp || f.use_deepspeed || !c.sharding_env.empty(),
        fsdp ? "FSDP flags need --use_fsdp (or a config file with distributed_type FSDP, without --multi_gpu or --cpu)"
             : "DeepSpeed flags need --use_deepspeed (or a config file with distributed_type DEEPSPEED, without "
               "--multi_gpu or --cpu)");
    const bool same_kind = c.sharding_env.count(fsdp ? "ACCELERATE_USE_FSDP" : "ACCELERATE_USE_DEEPSPEED");
    // Each flag given replaces the file's setting of that key, the others stay the file's (found by a
    // hunt: any FSDP flag put every other setting back to its default), as Accelerate's launch
    // copies a config key unless its flag was given.
    auto settings = fsdp ? fsdp_flags : deepspeed_flags;
    // FSDP1's strategy has two keys (Accelerate's questionnaire writes it in fsdp_reshard_after_forward):
    // a flag for either replaces the file's other one too, as Accelerate's flag wins.
    const bool strategy_flagged =
        settings.count("fsdp_sharding_strategy") || settings.count("fsdp_reshard_after_forward");
    if (same_kind && file)
      for (const auto& [key, value] : file->sharding_settings)
        if (!(strategy_flagged && (key == "fsdp_sharding_strategy" || key == "fsdp_reshard_after_forward")))
          settings.emplace(key, value);
    // As the config file's key (config_file.cpp): only one launch per machine is this launcher's way.
    const auto multinode = settings.find("deepspeed_multinode_launcher");
    require(fsdp || c.num_machines <= 1 || multinode == settings.end() || multinode->second == "standard",
            "--deepspeed_multinode_launcher ", multinode == settings.end() ? "" : multinode->second, " on ",
            c.num_machines, " machines is not supported: it starts every machine's processes from this one; use ",
            "standard and run accelerate launch on each machine with its machine_rank");
    // The flags are read as settings of the file's FSDP version (FSDP2's reshard_after_forward is
    // no strategy); a flag cannot change the version under the file's other settings.
    if (fsdp && same_kind) {
      const auto filed = c.sharding_env.find("FSDP_VERSION");
      const std::string file_version = filed == c.sharding_env.end() ? "1" : filed->second;
      const auto flagged = fsdp_flags.find("fsdp_version");
      require(flagged == fsdp_flags.end() || flagged->second == file_version, "--fsdp_version ",
              flagged == fsdp_flags.end() ? "" : flagged->second, " differs from the config file's fsdp_version ",
              file_version, ": change it in the file (`accelerate to-fsdp2` converts one)");
      settings["fsdp_version"] = file_version;
    }
    auto env = fsdp ? fsdp_environment(settings, "accelerate launch flags and the config file", c.warnings)
                    : deepspeed_environment(settings, "accelerate launch flags and the config file", c.warnings);
    if (!same_kind) c.sharding_env.clear();
    for (auto& [key, value] : env) c.sharding_env[key] = value;
  }
  // Accelerate's ParallelismConfig: the file's section (in its FSDP's variables already), each flag
  // given replacing its setting.
  const auto parallelism_flags = given(f.parallelism);
  if (f.use_parallelism_config || !parallelism_flags.empty()) {
    const bool filed = file && !f.multi_gpu && !f.cpu && !file->parallelism_settings.empty();
    require(f.use_parallelism_config || filed, "--parallelism_config_* flags need --use_parallelism_config (or a ",
            "config file with a parallelism_config section)");
    std::map<std::string, std::string> settings;
    if (filed) settings = file->parallelism_settings;
    for (const auto& [name, value] : parallelism_flags) settings["parallelism_config_" + name] = value;
    for (auto it = c.sharding_env.begin(); it != c.sharding_env.end();)
      it = it->first.find("PARALLELISM_CONFIG") != std::string::npos ? c.sharding_env.erase(it) : std::next(it);
    const auto env =
        parallelism_environment(settings, c.sharding_env, "accelerate launch flags and the config file", c.warnings);
    require(!env.empty(), "--use_parallelism_config needs FSDP with fsdp_version 2 (--use_fsdp --fsdp_version 2, ",
            "or a config file's), as Accelerate's launcher");
    c.sharding_env.insert(env.begin(), env.end());
  }
  // Port 0 is Accelerate's "pick a free one", which on one machine is what no port means.
  if (c.main_process_port == 0 && c.num_machines == 1) c.main_process_port.reset();
  c.command = std::move(command);
  return c;
}

}  // namespace acc

// What `accelerate launch` was told on its command line, and how that combines with the config
// file: a flag given > the config file > the default.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config_file.h"
#include "launch/launcher.h"

namespace acc {

// Each field is set only when its flag was given.
struct LaunchFlags {
  std::optional<int> num_processes;
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;  // 0: a free port
  std::optional<std::string> mixed_precision;
  std::optional<int> gradient_accumulation_steps;
  bool cpu = false;
  bool multi_gpu = false;  // GPUs even if the config file says use_cpu
  bool debug = false;
  bool enable_cpu_affinity = false;
  std::optional<std::string> gpu_ids;
  std::optional<int> num_cpu_threads_per_process;
  std::optional<int> max_restarts;
  std::optional<double> kill_timeout_seconds;
  bool no_prefix = false;
  std::optional<double> monitor_interval_seconds;
  std::optional<std::string> rdzv_backend;  // Accelerate's default, static, is the only one
  std::optional<std::string> rdzv_conf;
  std::optional<std::string> tee, redirects, log_dir, role;  // torchrun's output routing and role
  // --use_fsdp / --use_deepspeed and their settings (empty values: not given).
  bool use_fsdp = false;
  bool use_deepspeed = false;
  std::map<std::string, std::string> fsdp, deepspeed;
  // --use_parallelism_config and --parallelism_config_<name> (keyed by name; empty: not given).
  bool use_parallelism_config = false;
  std::map<std::string, std::string> parallelism;
};

// The launch configuration from the flags and the config file (none: defaults only) found at
// `config_path`; `command` is the program and its arguments.
LaunchConfig resolve_launch_config(const LaunchFlags& flags, const std::optional<ClusterConfig>& file,
                                   const std::optional<std::string>& config_path, std::vector<std::string> command);

}  // namespace acc

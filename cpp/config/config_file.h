// Accelerate's config file (`default_config.yaml`, as Python's `accelerate config` writes it):
// where it is found, reading it with checks that name the line to fix, and writing it back.
// Used by the `accelerate` command (launch, config, env, test) and by the Accelerator, which
// takes from it what neither the program nor ACCELERATE_* variables set.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace acc {

// Accelerate's ClusterConfig. The keys this runtime acts on are typed fields; every other key is
// kept as YAML text in `other`, so that a file read and written back loses nothing.
struct ClusterConfig {
  std::string compute_environment = "LOCAL_MACHINE";
  std::string distributed_type = "NO";  // NO, MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED (MEGATRON_LM: DDP)
  std::string mixed_precision = "no";   // no, fp16, bf16
  bool use_cpu = false;
  bool debug = false;
  int num_processes = 1;  // in the whole job, over every machine; -1: not set (Accelerate's default)
  int machine_rank = 0;
  int num_machines = 1;
  std::optional<std::string> gpu_ids;  // "all" or "0,1,..."
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;  // 0: a free port
  std::string rdzv_backend = "static";
  bool same_network = false;
  std::string main_training_function = "main";
  bool enable_cpu_affinity = false;
  std::optional<int> gradient_accumulation_steps;  // this runtime's key; Accelerate's has none
  std::map<std::string, std::string> other;        // key -> YAML text of its value
  // distributed_type FSDP / DEEPSPEED: the variables Accelerate's launcher sets from fsdp_config /
  // deepspeed_config (config/sharding_config.h).
  std::map<std::string, std::string> sharding_env;
  // The fsdp_config / deepspeed_config settings themselves (the launcher's flags override them key by key).
  std::map<std::string, std::string> sharding_settings;
  // The parallelism_config section's settings (Accelerate's ParallelismConfig; its variables join
  // sharding_env under FSDP 2, config/parallelism_config.h).
  std::map<std::string, std::string> parallelism_settings;

  std::set<std::string> present;      // the keys the file had (after legacy keys were converted)
  std::vector<std::string> warnings;  // what the file asks for that this runtime ignores

  // Whether the job runs on the CPU (use_cpu, or a MULTI_CPU job), and whether the file says so.
  bool wants_cpu() const { return use_cpu || distributed_type == "MULTI_CPU"; }
  bool says_cpu() const { return present.count("use_cpu") || distributed_type == "MULTI_CPU"; }
};

// The directory Accelerate keeps its config in: $HF_HOME/accelerate, else
// $XDG_CACHE_HOME/huggingface/accelerate, else ~/.cache/huggingface/accelerate.
std::string config_cache_dir();
// config_cache_dir() + "/default_config.yaml".
std::string default_config_path();

// The file to use: `explicit_path` if given (it must exist), else none under
// $ACCELERATE_NO_CONFIG_FILE (set by `accelerate launch` for the processes of a job without a
// config file), else $ACCELERATE_CONFIG_FILE (set by the launcher for the processes of a job with
// one; it must exist), else the default file if it exists and `default_file` (Accelerate's launcher
// reads none under --cpu), else none.
std::optional<std::string> find_config_file(const std::optional<std::string>& explicit_path, bool default_file = true);

// Reads and checks a config file (YAML, or JSON, which is YAML too). A file that cannot be read
// is an Io error, a value that is wrong an InvalidArgument error; both name the file (and line).
ClusterConfig load_config_file(const std::string& path);
ClusterConfig parse_config_text(const std::string& text, const std::string& origin);

// Writes `config` as Accelerate does: YAML with sorted keys, or JSON if the path ends in .json.
// Creates the parent directories.
// `json_text`: JSON whatever the name (Accelerate's `config default` writes JSON into default_config.yaml).
void save_config_file(const ClusterConfig& config, const std::string& path, bool json_text = false);
// The keys Accelerate's ClusterConfig.to_dict always writes that the file may lack (downcast_bf16,
// tpu_use_cluster, tpu_use_sudo: false), as `config default` and `config update` write them.
void add_cluster_config_defaults(ClusterConfig& config);
std::string config_to_yaml(const ClusterConfig& config);

// What `accelerate config --default` writes: every GPU of this machine (or one CPU process).
ClusterConfig default_cluster_config(const std::string& mixed_precision, int gpu_count);

// Prints the file's warnings to stderr, once per file and process.
void report_config_warnings(const ClusterConfig& config, const std::string& path);

// The config file the library reads for options a program did not set (see find_config_file; the
// default file only in a process that no other launcher started, see config_file.cpp); none if
// there is none. Its warnings are reported once, by the main process, unless the
// launcher already did.
std::optional<ClusterConfig> implicit_config();

}  // namespace acc

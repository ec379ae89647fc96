// accelerate-launch: starts the processes of a data-parallel job on this machine with torchrun's
// environment, relays their output, forwards signals, and tears the group down when one fails.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc {

struct LaunchConfig {
  int num_processes = 1;  // in the whole job, over all machines
  int num_machines = 1;
  int machine_rank = 0;
  std::optional<std::string> main_process_ip;  // machine 0's address; needed on several machines
  std::optional<int> main_process_port;  // none: a free port (one machine only)
  std::optional<std::string> mixed_precision;
  std::optional<int> gradient_accumulation_steps;
  bool cpu = false;
  std::optional<int> num_cpu_threads_per_process;
  std::optional<std::string> gpu_ids;
  bool debug = false;                      // ACCELERATE_DEBUG_MODE: shapes checked before collectives
  bool cpu_affinity = false;               // ACCELERATE_CPU_AFFINITY: each process pinned to its GPU's cores
  std::optional<std::string> config_file;  // the config file used: its processes read the same one
  int max_restarts = 0;
  double kill_timeout_seconds = 30.0;  // at teardown: SIGTERM, then SIGKILL after this long (torchrun's 30)
  bool prefix_output = true;          // "[rank N] " before each line when several processes run
  double monitor_interval_seconds = 0.1;  // how often the processes are checked (torchrun's 0.1)
  std::vector<std::string> command;   // program and arguments
  // torchrun's output routing (launch/worker_logs.h): streams written to a log file only
  // (redirects), or to the file and the console (tee); "0" none, "3" both, "0:3,1:1" per local rank.
  std::string redirects = "0", tee = "0";
  std::optional<std::string> log_dir;  // where the run's log folder goes (none: $TMPDIR, if logs are asked for)
  std::string role = "default";        // torchrun's ROLE_NAME
  // FSDP / DeepSpeed settings as Accelerate's launcher variables (config/sharding_config.h).
  std::map<std::string, std::string> sharding_env;
  std::vector<std::string> warnings;  // what the flags ask for that is ignored here, for the user
};

// Checks the configuration; usage errors throw acc::Error(InvalidArgument) with what to fix.
void validate_launch_config(const LaunchConfig& config);

// The environment of local process `local_rank`: torchrun's variables and Accelerate's (without
// TORCHELASTIC_ERROR_FILE, which comes with a log folder).
std::map<std::string, std::string> launch_environment(const LaunchConfig& config, int local_rank, int port,
                                                      int restart_count);

// Whether `port` is taken on this machine (as the rendezvous store would bind it).
bool port_in_use(int port);

// Runs the job; returns the exit code for accelerate-launch: 0 if every process succeeded, else the
// first failing process's code (128 + signal for a signal).
int run_launch(const LaunchConfig& config);

}  // namespace acc

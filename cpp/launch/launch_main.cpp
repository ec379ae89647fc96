// accelerate-launch: the command line over run_launch (see launch/launcher.h).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/error.h"
#include "launch/launcher.h"

int main(int argc, char** argv) {
  acc::LaunchConfig config;
  CLI::App app{"Runs PROGRAM on N processes of a data-parallel job (torchrun's environment plus Accelerate's)",
               "accelerate-launch"};
  app.add_option("--num_processes", config.num_processes, "processes in the whole job");
  app.add_option("--num_machines", config.num_machines, "machines in the job");
  app.add_option("--machine_rank", config.machine_rank, "rank of this machine");
  app.add_option("--main_process_ip", config.main_process_ip, "address of machine 0");
  std::optional<int> port;
  app.add_option("--main_process_port", port, "port of the rendezvous (default: a free port on one machine)");
  std::optional<std::string> precision;
  app.add_option("--mixed_precision", precision, "no, fp16 or bf16")->check(CLI::IsMember({"no", "fp16", "bf16"}));
  std::optional<int> accumulation;
  app.add_option("--gradient_accumulation_steps", accumulation, "micro-steps per optimizer step");
  app.add_flag("--cpu", config.cpu, "train on the CPU even when a GPU is there");
  std::optional<int> threads;
  app.add_option("--num_cpu_threads_per_process", threads, "OMP_NUM_THREADS of each process");
  std::optional<std::string> gpus;
  app.add_option("--gpu_ids", gpus, "GPUs to use, as CUDA_VISIBLE_DEVICES (e.g. 0,1)");
  app.add_option("--max_restarts", config.max_restarts, "restarts of the whole group after a failure");
  app.add_option("--kill_timeout", config.kill_timeout_seconds, "seconds between SIGTERM and SIGKILL at teardown");
  app.add_flag("!--no_prefix", config.prefix_output, "do not prefix output lines with the rank");
  std::string module;
  app.add_option("-m,--module", module, "run a Python module: python3 -m MODULE ARGS");
  app.prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  config.main_process_port = port;
  config.mixed_precision = precision;
  config.gradient_accumulation_steps = accumulation;
  config.num_cpu_threads_per_process = threads;
  config.gpu_ids = gpus;
  const auto rest = app.remaining();
  if (!rest.empty() && rest[0].size() > 1 && rest[0][0] == '-') {
    std::fprintf(stderr, "accelerate-launch: unknown option %s (see --help)\n", rest[0].c_str());
    return 2;
  }
  if (!module.empty()) config.command = {"python3", "-m", module};
  for (auto& arg : rest) config.command.push_back(arg);
  try {
    return acc::run_launch(config);
  } catch (const acc::Error& e) {
    std::fprintf(stderr, "accelerate-launch: %s\n", e.what());
    return e.status() == acc::Status::InvalidArgument ? 2 : 1;
  }
}

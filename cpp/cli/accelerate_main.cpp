// accelerate: the command line — launch, config, env, test, estimate-memory, merge-weights. Installed as
// `accelerate-launch` too, where it is `accelerate launch`.
// Exit codes: 0 success; 2 a usage error (a flag, a value, a config file to fix); else the failing
// process's code (launch, test) or 1.
#include <c10/util/Exception.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <type_traits>

#include "cli/env_report.h"
#include "cli/estimate_memory.h"
#include "cli/questionnaire.h"
#include "cli/self_check.h"
#include "common/device.h"
#include "common/error.h"
#include "common/options.h"
#include "common/text.h"
#include "config/config_file.h"
#include "config/fsdp2_conversion.h"
#include "config/parallelism_config.h"
#include "launch/inherited_signals.h"
#include "launch/launch_flags.h"
#include "launch/python_only_flags.h"
#include "parallel/merge_shards.h"
#include "parallel/sharded_checkpoint_parts.h"

namespace {

// An option's names with Accelerate's spellings: each `--a_b` is also accepted as `--a-b`.
std::string with_dashes(const std::string& names) {
  std::string out = names;
  for (std::string name : acc::split_trimmed(names, ',')) {
    const size_t body = name.find("--");
    if (body == std::string::npos || name.find('_', body) == std::string::npos) continue;
    std::replace(name.begin() + static_cast<std::ptrdiff_t>(body), name.end(), '_', '-');
    out += "," + name;
  }
  return out;
}

// add_option / add_flag with the dashed spellings too.
template <typename T>
constexpr bool is_vector = false;
template <typename T>
constexpr bool is_vector<std::vector<T>> = true;

template <typename T, typename... Args>
CLI::Option* option(CLI::App* app, const std::string& names, T& target, Args&&... args) {
  CLI::Option* added = app->add_option(with_dashes(names), target, std::forward<Args>(args)...);
  // Given twice, an option takes its last value, as argparse does (scripts append overrides to a
  // base command). A list option (--dtypes) collects the values of every time it is given.
  if constexpr (!is_vector<T>) added->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return added;
}
template <typename... Args>
CLI::Option* flag(CLI::App* app, const std::string& names, Args&&... args) {
  return app->add_flag(with_dashes(names), std::forward<Args>(args)...);
}

// A number from `least` to `most` (CLI11's Range says "Value abc not in range 1 to 1048576" of a
// value that is no number at all, and prints its doubles as 0.000000).
template <typename T>
CLI::Validator in_range(T least, T most) {
  const auto text_of = [](T value) {
    std::ostringstream out;
    out << value;
    return out.str();
  };
  const std::string bounds = text_of(least) + " to " + text_of(most);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::conditional_t<std::is_integral_v<T>, long long, double> value{};  // wide: "1e20" is out of range
        if (!CLI::detail::lexical_cast(text, value))
          return "'" + text + "' is not " + (std::is_integral_v<T> ? "a whole number" : "a number");
        if (value < least || value > most) return "'" + text + "' is not from " + bounds;
        return "";
      },
      "[" + bounds + "]");
}

struct LaunchArgs {
  acc::LaunchFlags flags;
  std::optional<std::string> config_file;
  bool module = false, no_python = false, same_network = false, quiet = false;
  // Python Accelerate's flags for what this runtime does not do (launch/python_only_flags.h), by name.
  std::map<std::string, std::vector<std::string>> python_only_values;
  std::map<std::string, bool> python_only_switches;
};

void add_launch_options(CLI::App* app, LaunchArgs& a) {
  auto& f = a.flags;
  option(app, "--config_file", a.config_file, "config file (default: Accelerate's default_config.yaml)");
  option(app, "--num_processes", f.num_processes, "processes in the whole job")->check(in_range(1, 1 << 20));
  option(app, "--num_machines", f.num_machines, "machines in the job")->check(in_range(1, 1 << 20));
  option(app, "--machine_rank", f.machine_rank, "rank of this machine")->check(in_range(0, 1 << 20));
  option(app, "--main_process_ip", f.main_process_ip, "address of machine 0");
  option(app, "--main_process_port", f.main_process_port, "port of the rendezvous (0 or none: a free port)")
      ->check(in_range(0, 65535));
  option(app, "--mixed_precision", f.mixed_precision, "no, fp16 or bf16")
      ->check(CLI::Validator(
                  [](std::string& value) -> std::string {
                    return value == "fp8" ? "fp8 is not supported by this runtime (no, fp16 or bf16)" : "";
                  },
                  "")
                  .description(""))
      ->check(CLI::IsMember(acc::mixed_precision_choices()));
  option(app, "--gradient_accumulation_steps", f.gradient_accumulation_steps, "micro-steps per optimizer step")
      ->check(in_range(1, 1 << 20));
  flag(app, "--cpu", f.cpu, "train on the CPU even when a GPU is there");
  flag(app, "--multi_gpu", f.multi_gpu, "train on GPUs even if the config file says use_cpu");
  flag(app, "--debug", f.debug, "check tensor shapes across processes before each collective");
  flag(app, "--enable_cpu_affinity", f.enable_cpu_affinity, "pin each process to the CPU cores of its GPU");
  option(app, "--num_cpu_threads_per_process", f.num_cpu_threads_per_process, "OMP_NUM_THREADS of each process")
      ->check(in_range(1, 1 << 20));
  option(app, "--gpu_ids", f.gpu_ids, "GPUs to use, as CUDA_VISIBLE_DEVICES (e.g. 0,1), or all");
  option(app, "--max_restarts", f.max_restarts, "restarts of the whole group after a failure")
      ->check(in_range(0, 1000));
  option(app, "--kill_timeout", f.kill_timeout_seconds,
         "seconds between SIGTERM and SIGKILL at teardown (30, as torchrun)")
      ->check(in_range(0.0, 3600.0));
  flag(app, "--no_prefix", f.no_prefix, "do not prefix output lines with the rank");
  option(app, "--monitor_interval", f.monitor_interval_seconds, "seconds between checks of the processes")
      ->check(in_range(0.001, 3600.0));
  option(app, "--rdzv_backend", f.rdzv_backend, "static (the only one: machine 0 hosts the store)");
  option(app, "--rdzv_conf", f.rdzv_conf, "nothing to configure for the static rendezvous");
  option(app, "-t,--tee", f.tee,
         "streams written to log files and shown: 0 none, 1 stdout, 2 stderr, 3 both, "
         "or per local rank as 0:3,1:1");
  option(app, "-r,--redirects", f.redirects, "streams written to log files only (same values as --tee)");
  option(app, "--log_dir", f.log_dir, "folder for the processes' log files (default: a temporary one)");
  option(app, "--role", f.role, "the processes' role (ROLE_NAME)");
  flag(app, "-m,--module", a.module, "PROGRAM is a Python module: run python3 -m PROGRAM ARGS");
  // Accelerate's flags that change nothing here: machines need no shared-network hint, and there is
  // no launch stack trace to silence.
  flag(app, "--no_python", a.no_python, "run a PROGRAM ending in .py as an executable, not through python3");
  flag(app, "--same_network", a.same_network, "accepted: the rendezvous needs no hint");
  flag(app, "-q,--quiet", a.quiet, "accepted: errors are short already");
  // Python Accelerate's flags for what is not built here, apart in --help.
  for (const acc::PythonOnlyFlag& python_only : acc::python_only_flags()) {
    const std::string name = "--" + python_only.name;
    const std::string help = python_only.answer == acc::PythonOnlyFlag::Answer::Refused ? "refused: " + python_only.why
                             : python_only.answer == acc::PythonOnlyFlag::Answer::Warned
                                 ? "accepted: " + python_only.why + " (warned about)"
                                 : "accepted, ignored (Accelerate uses it only with a feature not built here)";
    CLI::Option* added;
    if (!python_only.takes_value) {
      added = flag(app, name, a.python_only_switches[python_only.name], help);
    } else {  // one value each time given, as argparse's (a list: --vm and --env append theirs)
      added = option(app, name, a.python_only_values[python_only.name], help)
                  ->expected(1)
                  ->allow_extra_args(false)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      if (!python_only.choices.empty()) added->check(CLI::IsMember(python_only.choices));
    }
    added->group("Python Accelerate's, for what this runtime does not do");
  }
  // Sharded data parallelism, with Accelerate's flag names (values are checked when resolved).
  flag(app, "--use_fsdp", f.use_fsdp, "shard as FSDP does (see --fsdp_sharding_strategy)");
  for (const char* key :
       {"fsdp_sharding_strategy", "fsdp_offload_params", "fsdp_state_dict_type", "fsdp_auto_wrap_policy",
        "fsdp_transformer_layer_cls_to_wrap", "fsdp_min_num_params", "fsdp_version", "fsdp_reshard_after_forward",
        "fsdp_cpu_ram_efficient_loading", "fsdp_activation_checkpointing", "fsdp_ignored_modules"})
    option(app, std::string("--") + key, f.fsdp[key], "FSDP: as fsdp_config's key");
  // FSDP's tuning, which has no counterpart here: warned about, as the config keys are.
  for (const char* key : {"fsdp_backward_prefetch", "fsdp_forward_prefetch", "fsdp_use_orig_params",
                          "fsdp_sync_module_states"})
    option(app, std::string("--") + key, f.fsdp[key], "FSDP: accepted, ignored (warned about)");
  flag(app, "--use_parallelism_config", f.use_parallelism_config,
       "Accelerate's ParallelismConfig under FSDP 2 (data-parallel dimensions only)");
  for (const std::string& name : acc::parallelism_setting_names())
    option(app, "--parallelism_config_" + name, f.parallelism[name], "ParallelismConfig: as parallelism_config's key");
  flag(app, "--use_deepspeed", f.use_deepspeed, "shard as DeepSpeed's ZeRO does (see --zero_stage)");
  for (const char* key :
       {"zero_stage", "offload_optimizer_device", "offload_param_device", "gradient_clipping", "deepspeed_config_file",
        "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher", "deepspeed_moe_layer_cls_names",
        "deepspeed_hostfile", "deepspeed_inclusion_filter", "deepspeed_exclusion_filter"})
    option(app, std::string("--") + key, f.deepspeed[key], "DeepSpeed: as deepspeed_config's key");
}

// Python Accelerate's launch flags for what this runtime does not do: an error where the job would
// need it (a TPU, Megatron-LM, mpirun; exit 2), a warning where it would only run otherwise.
bool check_python_only_flags(const char* who, const LaunchArgs& a) {
  std::map<std::string, std::vector<std::string>> given = a.python_only_values;
  for (const auto& [name, on] : a.python_only_switches)
    if (on) given[name] = {"true"};
  try {
    for (const std::string& warning : acc::check_python_only_flags(given))
      std::fprintf(stderr, "%s: warning: %s\n", who, warning.c_str());
    return true;
  } catch (const acc::Error& e) {
    std::fprintf(stderr, "%s: %s\n", who, e.what());
    return false;
  }
}

// Usage errors, and errors in the config file, exit 2; others 1.
int report(const char* who, const acc::Error& e, bool config_stage) {
  std::fprintf(stderr, "%s: %s\n", who, e.what());
  return e.status() == acc::Status::InvalidArgument || config_stage ? 2 : 1;
}

// The config file in effect: the one given, else Accelerate's default if there is one (and
// `default_file`; see find_config_file).
std::pair<std::optional<std::string>, std::optional<acc::ClusterConfig>> load_config(
    const std::optional<std::string>& given, bool warn = true, bool default_file = true) {
  auto path = acc::find_config_file(given, default_file);
  if (!path) return {std::nullopt, std::nullopt};
  auto config = acc::load_config_file(*path);
  if (warn) acc::report_config_warnings(config, *path);
  return {path, config};
}

int run_launch(const char* who, LaunchArgs& a, std::vector<std::string> command) {
  if (!command.empty() && command[0] == "--") command.erase(command.begin());  // argparse's end of options
  if (!command.empty() && command[0].size() > 1 && command[0][0] == '-') {
    std::fprintf(stderr, "%s: unknown option %s (see %s --help)\n", who, command[0].c_str(), who);
    return 2;
  }
  if (a.module && a.no_python) {
    std::fprintf(stderr, "%s: --module and --no_python cannot be used together\n", who);
    return 2;
  }
  if (!check_python_only_flags(who, a)) return 2;
  // A Python module or script runs through python3, as Accelerate runs it; anything else as given.
  // Unbuffered (-u), as torchrun starts Python: lines are relayed as printed, not lost at a teardown.
  if (a.module && !command.empty())
    command.insert(command.begin(), {"python3", "-u", "-m"});
  else if (!a.no_python && !command.empty() && acc::ends_with(command[0], ".py"))
    command.insert(command.begin(), {"python3", "-u"});
  acc::LaunchConfig config;
  try {
    // As Accelerate's launcher: with --cpu, the default config file is not read (one given is).
    auto [path, file] = load_config(a.config_file, true, !a.flags.cpu);
    config = acc::resolve_launch_config(a.flags, file, path, std::move(command));
    for (const std::string& warning : config.warnings) std::fprintf(stderr, "%s: warning: %s\n", who, warning.c_str());
  } catch (const acc::Error& e) {
    return report(who, e, true);
  }
  try {
    return acc::run_launch(config);
  } catch (const acc::Error& e) {
    return report(who, e, false);
  }
}

std::string self_executable() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) acc::fail(acc::Status::Io, "cannot find this program's path (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

// A parse error as one line; --help prints help and exits 0.
int parse_error(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);
  std::string where = app.get_name();
  for (CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    where += " " + sub->get_name();
  }
  std::fprintf(stderr, "%s: %s (see %s --help)\n", app.get_name().c_str(), e.what(), where.c_str());
  return 2;
}

// Levenshtein distance: the edits that turn `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Empty when `word` is one of the commands; else what to tell the user, with the nearest command
// when one is a typo away (as argparse's "invalid choice").
std::string unknown_command(CLI::App& app, const std::string& word) {
  std::string names, nearest;
  size_t nearest_distance = 3;  // suggest only within two edits
  for (const CLI::App* sub : app.get_subcommands({})) {
    const std::string& name = sub->get_name();
    if (name == word) return "";
    if (sub->get_group().empty()) continue;  // hidden: never suggested
    names += (names.empty() ? "" : ", ") + name;
    if (const size_t distance = edit_distance(word, name); distance < nearest_distance)
      nearest_distance = distance, nearest = name;
  }
  return "unknown command '" + word + "'" + (nearest.empty() ? "" : ": did you mean '" + nearest + "'?") +
         " (commands: " + names + ")";
}

// `accelerate launch ...` and `accelerate-launch ...` alike (`name`: how the user called it).
int launch_only(int argc, char** argv, const std::string& name) {
  CLI::App app{"Runs PROGRAM on N processes of a data-parallel job (same as `accelerate launch`)", name};
  LaunchArgs args;
  add_launch_options(&app, args);
  app.prefix_command();
  app.footer("PROGRAM [ARGS...] follow the options, after a -- if you like (as Accelerate takes them).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e);
  }
  return run_launch(name.c_str(), args, app.remaining());
}

// accelerate merge-weights: Accelerate's flags; its .bin output is not written here.
int merge_weights(const std::string& from, size_t model, const std::string& to, const std::string& max_shard_size,
                  bool unsafe, bool remove) {
  if (unsafe) {
    std::fprintf(stderr, "accelerate merge-weights: --unsafe_serialization (pickled .bin) is not supported: the "
                         "merged weights are written as safetensors only\n");
    return 2;
  }
  const auto files = acc::merge_sharded_checkpoint(from, model, to, max_shard_size);
  for (const auto& file : files) std::printf("wrote %s\n", (std::filesystem::path(to) / file).c_str());
  if (remove)  // the shards just merged, not the rest of the checkpoint (optimizer state, RNG, ...)
    for (int64_t r = 0;; ++r) {
      const std::filesystem::path shard = std::filesystem::path(from) / acc::shard_name("model", model, r);
      std::error_code ec;
      if (!std::filesystem::remove(shard, ec)) break;
      std::printf("removed %s\n", shard.c_str());
    }
  return 0;
}

// accelerate to-fsdp2: Accelerate's checks (the file exists; an output, or --overwrite; an
// existing output only with --overwrite), then the file converted and written.
int convert_config_to_fsdp2(const std::string& from, std::optional<std::string> to, bool overwrite) {
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) acc::fail(acc::Status::Io, "config file ", from, " not found");
  if (!overwrite && !to) acc::fail(acc::Status::InvalidArgument, "without --overwrite, --output_file must be given");
  if (!overwrite && std::filesystem::exists(*to, ec))
    acc::fail(acc::Status::InvalidArgument, "output file ", *to, " already exists and --overwrite is not set");
  std::vector<std::string> notes;
  auto converted = acc::convert_to_fsdp2(acc::load_config_file(from), from, notes);
  acc::add_cluster_config_defaults(converted);  // written as `accelerate config` writes a file
  for (const auto& note : notes) std::fprintf(stderr, "accelerate to-fsdp2: %s\n", note.c_str());
  const std::string path = to.value_or(from);
  acc::save_config_file(converted, path);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace

namespace {

// Before any shared library initializes (see launch/inherited_signals.h): the ELF preinit array,
// which only a program has.
void record_inherited_signals(int, char**, char**) { acc::record_inherited_sighup(); }
__attribute__((section(".preinit_array"),
               used)) void (*const g_record_inherited_signals)(int, char**, char**) = &record_inherited_signals;

// A report that could not be written (a full disk, /dev/full) is a failure, not exit 0, as
// coreutils' programs treat it: checked once the command is done, whatever it returned.
void fail_on_lost_output() {
  std::cout.flush();
  const bool lost = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return;
  std::fprintf(stderr, "accelerate: cannot write its output: %s\n", errno != 0 ? std::strerror(errno) : "write error");
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string invoked = argv[0];
  if (acc::ends_with(invoked, "accelerate-launch")) return launch_only(argc, argv, "accelerate-launch");
  // Parsed on its own: the program's arguments (and a `--` before them) are not the command line's.
  if (argc > 1 && std::string(argv[1]) == "launch") return launch_only(argc - 1, argv + 1, "accelerate launch");

  std::atexit(fail_on_lost_output);
  CLI::App app{"Accelerate (C++ runtime): configure, check and launch data-parallel training", "accelerate"};
  app.require_subcommand(1);

  // Listed here; parsed by launch_only.
  app.add_subcommand("launch", "run PROGRAM on the job's processes (flags > config file > defaults)");

  std::optional<std::string> config_path;
  bool config_default = false;
  std::string default_precision = "no";
  auto* config = app.add_subcommand("config", "answer a few questions and save a config file");
  option(config, "--config_file", config_path, "where to save it (default: Accelerate's default_config.yaml)");
  flag(config, "--default", config_default, "write a default config without asking (every GPU, or one CPU process)");
  auto* config_precision = option(config, "--mixed_precision", default_precision, "mixed precision of --default")
                               ->check(CLI::IsMember(acc::mixed_precision_choices()));
  auto* config_default_cmd = config->add_subcommand("default", "same as config --default");
  option(config_default_cmd, "--config_file", config_path, "where to save it");
  option(config_default_cmd, "--mixed_precision", default_precision, "no, fp16 or bf16")
      ->check(CLI::IsMember(acc::mixed_precision_choices()));
  auto* config_update = config->add_subcommand("update", "rewrite a config file in the current format, keeping its values");
  option(config_update, "--config_file", config_path, "the file (default: Accelerate's default_config.yaml)");

  auto* env = app.add_subcommand("env", "print versions, hardware and the config in effect, for bug reports");
  option(env, "--config_file", config_path, "config file (default: Accelerate's default_config.yaml)");

  LaunchArgs test_args;
  auto* test = app.add_subcommand("test", "check the job's processes: collectives, DDP steps, a checkpoint");
  option(test, "--config_file", test_args.config_file, "config file (default: Accelerate's default_config.yaml)");
  option(test, "--num_processes", test_args.flags.num_processes, "processes (default: the config's)")
      ->check(in_range(1, 1 << 20));
  flag(test, "--cpu", test_args.flags.cpu, "run on the CPU even when a GPU is there");

  std::string model_path;
  std::vector<std::string> dtypes = {"float32", "float16", "bfloat16", "int8", "int4"};
  bool as_json = false;
  auto* estimate = app.add_subcommand("estimate-memory", "memory of a model's weights and of training it with Adam");
  estimate->add_option("model", model_path, "a TorchScript file, or a layer spec (a .json file)")->required();
  option(estimate, "--dtypes", dtypes, "dtypes to show")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16", "int8", "int4"}));
  flag(estimate, "--json", as_json, "print JSON instead of a table");

  std::string merge_from, merge_to = ".", merge_shard_size = "10GB";
  size_t merge_model = 0;  // the text is checked before CLI11 converts it (-1 would wrap)
  bool merge_unsafe = false, merge_remove = false;
  auto* merge = app.add_subcommand("merge-weights", "merge a SHARDED_STATE_DICT checkpoint's model shards into full weights");
  merge->add_option("checkpoint_directory", merge_from, "the checkpoint folder (model_shard_<rank>.safetensors)")->required();
  merge->add_option("output_path", merge_to, "where to write model.safetensors (default: the current folder)");
  option(merge, "--model", merge_model, "which model of the checkpoint (0: model_shard_*, 1: model_1_shard_*)")
      ->check(in_range(int64_t{0}, int64_t{1} << 20));
  option(merge, "--max_shard_size", merge_shard_size, "shard the output beyond this size, as save_model");
  flag(merge, "--unsafe_serialization", merge_unsafe, "(Accelerate's .bin output: not written here)");
  flag(merge, "--remove_checkpoint_dir", merge_remove, "remove the merged model's shard files afterwards");

  std::string fsdp2_from;
  std::optional<std::string> fsdp2_to;
  bool fsdp2_overwrite = false;
  auto* to_fsdp2 = app.add_subcommand("to-fsdp2", "convert a config file's FSDP1 settings to FSDP2's");
  option(to_fsdp2, "--config_file", fsdp2_from, "the config file to convert")->required();
  option(to_fsdp2, "--output_file", fsdp2_to, "where to write the result (default with --overwrite: the file itself)");
  flag(to_fsdp2, "--overwrite", fsdp2_overwrite, "replace the output file (or the config file itself)");

  auto* worker = app.add_subcommand("self-check-worker", "one process of `accelerate test`");
  worker->group("");  // hidden: started by `accelerate test` through the launcher

  if (argc > 1 && argv[1][0] != '-') {
    if (const std::string unknown = unknown_command(app, argv[1]); !unknown.empty()) {
      std::fprintf(stderr, "accelerate: %s (see accelerate --help)\n", unknown.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e);
  }

  try {
    if (*to_fsdp2) return convert_config_to_fsdp2(fsdp2_from, fsdp2_to, fsdp2_overwrite);
    if (*merge) return merge_weights(merge_from, merge_model, merge_to, merge_shard_size, merge_unsafe, merge_remove);
    if (*worker) return acc::run_self_check();
    if (*test) {
      const int code = run_launch("accelerate test", test_args, {self_executable(), "self-check-worker"});
      if (code == 0) std::printf("Test is a success: this machine is ready for distributed training.\n");
      return code;
    }
    if (*config) {
      const std::string path = config_path.value_or(acc::default_config_path());
      if (*config_update) {
        auto found = acc::find_config_file(config_path);
        if (!found)
          acc::fail(acc::Status::InvalidArgument, "no config file at ", path, ": create one with `accelerate config`");
        acc::ClusterConfig updated = acc::load_config_file(*found);
        acc::add_cluster_config_defaults(updated);
        acc::save_config_file(updated, *found);
        std::printf("Successfully updated the configuration file at %s.\n", found->c_str());
        return 0;
      }
      if (!config_default && !*config_default_cmd && config_precision->count() > 0) {
        std::fprintf(stderr,
                     "accelerate config: --mixed_precision goes with --default (the questions ask for it "
                     "otherwise)\n");
        return 2;
      }
      if (config_default || *config_default_cmd) {
        if (access(path.c_str(), F_OK) == 0) {
          std::fprintf(stderr,
                       "accelerate config: %s already exists and is kept: run `accelerate config` to change it, "
                       "or pass another --config_file\n",
                       path.c_str());
          return 0;  // as Accelerate: nothing written, not a failure
        }
        acc::save_config_file(acc::default_cluster_config(default_precision, acc::cuda_device_count()), path,
                              /*json_text=*/true);  // as Accelerate's write_basic_config
      } else {
        auto answers = acc::ask_cluster_config(std::cin, std::cout, isatty(STDIN_FILENO), acc::cuda_device_count());
        acc::save_config_file(answers, path);
      }
      std::printf("accelerate configuration saved at %s\n", path.c_str());
      return 0;
    }
    if (*env) {
      std::optional<std::string> path;
      std::optional<acc::ClusterConfig> file;
      std::string problem;
      try {
        std::tie(path, file) = load_config(config_path, false);  // the report lists the warnings
      } catch (const acc::Error& e) {
        problem = e.what();
      }
      std::cout << acc::env_report(path, file, problem.empty() ? std::nullopt : std::optional<std::string>(problem));
      if (!problem.empty()) {
        std::cout << std::flush;
        std::fprintf(stderr, "accelerate env: the config file cannot be used: %s\n", problem.c_str());
        return 2;
      }
      return 0;
    }
    if (*estimate) {
      auto sizes = acc::model_sizes(*acc::load_model_file(model_path, /*weights_pending=*/true));
      auto rows = acc::memory_rows(sizes, dtypes);
      std::cout << (as_json ? acc::memory_json(sizes, rows) + "\n" : acc::memory_table("`" + model_path + "`", sizes, rows));
      return 0;
    }
  } catch (const acc::Error& e) {
    return report("accelerate", e, e.status() == acc::Status::Io);
  } catch (const c10::Error& e) {  // libtorch's message, without its C++ backtrace
    std::fprintf(stderr, "accelerate: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelerate: %s\n", e.what());
    return 1;
  }
  return 2;
}

#include "cli/questionnaire.h"

#include <yaml-cpp/yaml.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <istream>
#include <ostream>

#include "common/error.h"
#include "common/options.h"
#include "config/parallelism_config.h"
#include "config/sharding_config.h"

namespace acc {
namespace {

class Asker {
 public:
  Asker(std::istream& in, std::ostream& out, bool terminal) : in_(in), out_(out), terminal_(terminal) {}

  // Asks until `parse` accepts the answer (it returns an error text, empty when it accepted).
  void ask(const std::string& question, const std::string& fallback,
           const std::function<std::string(const std::string&)>& parse) {
    for (;;) {
      out_ << question << (fallback.empty() ? "" : " [" + fallback + "]") << ": " << std::flush;
      std::string answer;
      if (!std::getline(in_, answer))
        fail(Status::InvalidArgument, "the input ended before the question '", question,
             "' was answered: run `accelerate config` on a terminal, or use `accelerate config --default`");
      if (!terminal_) out_ << answer << "\n";
      answer = trim(answer);
      if (answer.empty()) answer = fallback;
      const std::string error = parse(answer);
      if (error.empty()) return;
      if (!terminal_) fail(Status::InvalidArgument, "answer '", answer, "' to '", question, "': ", error);
      out_ << "  " << error << "\n";
    }
  }

  int integer(const std::string& question, int fallback, int min, int max) {
    int value = fallback;
    ask(question, std::to_string(fallback), [&](const std::string& a) -> std::string {
      char* end = nullptr;
      const long v = std::strtol(a.c_str(), &end, 10);
      if (a.empty() || *end || v < min || v > max)
        return "enter a whole number from " + std::to_string(min) + " to " + std::to_string(max);
      value = static_cast<int>(v);
      return "";
    });
    return value;
  }

  bool yes_no(const std::string& question, bool fallback) {
    bool value = fallback;
    ask(question + (fallback ? " [YES/no]" : " [yes/NO]"), "", [&](const std::string& a) -> std::string {
      if (a.empty()) return "";
      auto v = parse_bool(a);
      if (!v) return "answer yes or no";
      value = *v;
      return "";
    });
    return value;
  }

  // One of `choices`, by number (as Accelerate's menus take it), else by name.
  std::string choice(const std::string& question, const std::vector<std::string>& choices, size_t fallback) {
    out_ << question << "\n";
    for (size_t i = 0; i < choices.size(); ++i) out_ << "  " << i << ") " << choices[i] << "\n";
    std::string value = choices[fallback];
    ask("Your choice", std::to_string(fallback), [&](const std::string& a) -> std::string {
      for (size_t i = 0; i < choices.size(); ++i)
        if (a == std::to_string(i)) {
          value = choices[i];
          return "";
        }
      for (const auto& name : choices)
        if (a == name) {
          value = name;
          return "";
        }
      return "enter a number from 0 to " + std::to_string(choices.size() - 1);
    });
    return value;
  }

  // `optional`: an empty answer is an answer (an empty value).
  std::string text(const std::string& question, const std::string& fallback,
                   const std::function<std::string(const std::string&)>& check, bool optional = false) {
    std::string value;
    ask(question, fallback, [&](const std::string& a) -> std::string {
      if (a.empty() && optional) return "";
      if (a.empty()) return "an answer is needed";
      std::string error = check(a);
      if (error.empty()) value = a;
      return error;
    });
    return value;
  }

 private:
  static std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  }

  std::istream& in_;
  std::ostream& out_;
  bool terminal_;
};

// A config section as the YAML text ClusterConfig keeps, numbers and flags typed as Accelerate writes them.
std::string section_yaml(const SettingMap& settings) {
  YAML::Node node(YAML::NodeType::Map);
  for (const auto& [key, value] : settings) {
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (value == "true" || value == "false") node[key] = value == "true";
    else if (!value.empty() && !*end) node[key] = number;
    else node[key] = value;
  }
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

// Accelerate's FSDP questions, as fsdp_config keys: its version first (2 by default, as Accelerate
// asks), FSDP1's strategy or FSDP2's resharding after forward.
SettingMap ask_fsdp(Asker& ask) {
  SettingMap fsdp;
  fsdp["fsdp_version"] = ask.choice("What should be your FSDP version?", {"1", "2"}, 1);
  if (fsdp["fsdp_version"] == "1")
    fsdp["fsdp_sharding_strategy"] =
        ask.choice("What should be your sharding strategy?",
                   {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"}, 0);
  else
    fsdp["fsdp_reshard_after_forward"] =
        ask.yes_no("Do you want to enable resharding after forward (FULL_SHARD; no: SHARD_GRAD_OP)?", true) ? "true"
                                                                                                            : "false";
  fsdp["fsdp_offload_params"] = ask.yes_no("Do you want to offload parameters and gradients to CPU?", false) ? "true" : "false";
  const std::string policy =
      ask.choice("What should be your auto wrap policy?", {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}, 0);
  fsdp["fsdp_auto_wrap_policy"] = policy;
  if (policy == "TRANSFORMER_BASED_WRAP") {
    const std::string classes = ask.text(
        "Specify the comma-separated list of transformer layer class names (case-sensitive) to wrap, e.g. Block "
        "(empty: the submodules the forward calls)",
        "", [](const std::string&) { return std::string(); }, /*optional=*/true);
    if (!classes.empty()) fsdp["fsdp_transformer_layer_cls_to_wrap"] = classes;
  } else if (policy == "SIZE_BASED_WRAP") {
    fsdp["fsdp_min_num_params"] = std::to_string(
        ask.integer("What should be your FSDP's minimum number of parameters for Default Auto Wrapping Policy?",
                    100000000, 0, INT_MAX));
  }
  // Accelerate's menus and default (the first): FSDP1 offers a consolidated state first, FSDP2 shards.
  const bool fsdp2 = fsdp["fsdp_version"] == "2";
  fsdp["fsdp_state_dict_type"] = ask.choice("What should be your FSDP's state dict type?",
                                            fsdp2 ? std::vector<std::string>{"SHARDED_STATE_DICT", "FULL_STATE_DICT"}
                                                  : std::vector<std::string>{"FULL_STATE_DICT", "SHARDED_STATE_DICT"},
                                            0);
  fsdp["fsdp_cpu_ram_efficient_loading"] =
      ask.yes_no("Do you want to enable CPU RAM efficient model loading (only the main process builds the weights)?",
                 true) ? "true" : "false";
  fsdp["fsdp_activation_checkpointing"] =
      ask.yes_no("Do you want to enable FSDP activation checkpointing?", false) ? "true" : "false";
  return fsdp;
}

// Accelerate's parallelism-config questions (under FSDP2), as parallelism_config keys: its
// data-parallel dimensions, the ones built here (none when not wanted).
SettingMap ask_parallelism(Asker& ask, int num_processes) {
  SettingMap parallelism;
  if (!ask.yes_no("Do you want to use the parallelism config?", false)) return parallelism;
  const int replicate = ask.integer("What is the data parallelism replicate size?", 1, 1, num_processes);
  parallelism["parallelism_config_dp_replicate_size"] = std::to_string(replicate);
  parallelism["parallelism_config_dp_shard_size"] =
      std::to_string(ask.integer("What is the FSDP shard size?", num_processes / replicate, 1, num_processes));
  return parallelism;
}

// Accelerate's DeepSpeed questions, as deepspeed_config keys.
SettingMap ask_deepspeed(Asker& ask) {
  SettingMap deepspeed;
  if (ask.yes_no("Do you want to specify a json file to a DeepSpeed config?", false)) {
    deepspeed["deepspeed_config_file"] = ask.text("Please enter the path to the json DeepSpeed config file", "",
                                                  [](const std::string& a) -> std::string {
                                                    std::error_code ec;
                                                    return std::filesystem::is_regular_file(a, ec) ? "" : "no such file";
                                                  });
    return deepspeed;
  }
  const std::string stage = ask.choice("What should be your DeepSpeed's ZeRO optimization stage?", {"0", "1", "2", "3"}, 2);
  deepspeed["zero_stage"] = stage;
  if (stage == "2" || stage == "3") {  // where Accelerate asks them
    deepspeed["offload_optimizer_device"] = ask.choice("Where to offload optimizer states?", {"none", "cpu"}, 0);
    deepspeed["offload_param_device"] = ask.choice("Where to offload parameters?", {"none", "cpu"}, 0);
  }
  deepspeed["gradient_accumulation_steps"] = std::to_string(
      ask.integer("How many gradient accumulation steps you're passing in your script?", 1, 1, 1 << 20));
  if (ask.yes_no("Do you want to use gradient clipping?", false))
    deepspeed["gradient_clipping"] = ask.text("What is the gradient clipping value?", "1.0", [](const std::string& a) {
      char* end = nullptr;
      const double v = std::strtod(a.c_str(), &end);
      const bool decimal = a.find_first_of("xX") == std::string::npos;
      return *end || !decimal || !(v > 0) || !std::isfinite(v) ? std::string("enter a positive number") : std::string();
    });
  if (stage == "3" && ask.yes_no("Do you want to save 16-bit model weights when using ZeRO Stage-3?", false))
    deepspeed["zero3_save_16bit_model"] = "true";
  if (ask.yes_no("Do you want to enable `deepspeed.zero.Init` when using ZeRO Stage-3 for constructing massive models?",
                 false))
    deepspeed["zero3_init_flag"] = "true";
  return deepspeed;
}

}  // namespace

ClusterConfig ask_cluster_config(std::istream& in, std::ostream& out, bool terminal, int gpu_count) {
  Asker ask(in, out, terminal);
  ClusterConfig c = default_cluster_config("no", 0);
  const std::vector<std::string> kinds = {"No distributed training", "multi-CPU", "multi-GPU"};
  const std::string kind = ask.choice("Which type of machine are you using?", kinds, gpu_count > 1 ? 2 : 0);
  c.distributed_type = kind == kinds[0] ? "NO" : kind == kinds[1] ? "MULTI_CPU" : "MULTI_GPU";
  c.num_processes = 1;
  bool asks_precision = true;
  if (c.distributed_type != "NO") {
    c.num_machines = ask.integer("How many different machines will you use (more than 1 for multi-node training)?",
                                 1, 1, 1 << 16);
    if (c.num_machines > 1) {
      c.machine_rank = ask.integer("What is the rank of this machine?", 0, 0, c.num_machines - 1);
      c.main_process_ip = ask.text("What is the IP address of the machine that will host the main process?", "",
                                   [](const std::string&) { return std::string(); });
      c.main_process_port =
          ask.integer("What is the port you will use to communicate with the main process?", 29500, 1, 65535);
      c.same_network = ask.yes_no("Are all the machines on the same local network?", true);
    }
    const int machines = c.num_machines;
    const int each = c.distributed_type == "MULTI_GPU" && gpu_count > 0 ? gpu_count : 2;
    for (;;) {
      c.num_processes = ask.integer("How many processes in total will you use (over all machines)?", each * machines, 1,
                                    1 << 20);
      if (c.num_processes % machines == 0) break;
      if (!terminal)
        fail(Status::InvalidArgument, "num_processes (", c.num_processes, ") must be a multiple of the number of machines (",
             machines, ")");
      out << "  enter a multiple of the number of machines (" << machines << ")\n";
    }
    if (c.distributed_type == "MULTI_GPU")
      c.gpu_ids = ask.text("What GPU(s) (by id) should be used for training on this machine, as a comma-separated list?",
                           "all", [](const std::string& a) -> std::string {
                             if (a == "all" || a.find_first_not_of("0123456789,") == std::string::npos) return "";
                             return "enter all, or GPU ids such as 0,1";
                           });
    c.debug = ask.yes_no("Should distributed operations be checked while running for errors? This can avoid timeout "
                         "issues but will be slower.",
                         false);
    // Sharded data parallelism, in Accelerate's order: DeepSpeed first, then FSDP.
    const std::string origin = "accelerate config";
    if (ask.yes_no("Do you want to use DeepSpeed?", false)) {
      const SettingMap deepspeed = ask_deepspeed(ask);
      // Precision is the DeepSpeed section's (or its JSON file's) to say.
      asks_precision = !deepspeed.count("deepspeed_config_file");
      c.distributed_type = "DEEPSPEED";
      c.other["deepspeed_config"] = section_yaml(deepspeed);
      c.sharding_env = deepspeed_environment(deepspeed, origin, c.warnings);
    } else if (ask.yes_no("Do you want to use FullyShardedDataParallel?", false)) {
      const SettingMap fsdp = ask_fsdp(ask);
      c.distributed_type = "FSDP";
      c.other["fsdp_config"] = section_yaml(fsdp);
      c.sharding_env = fsdp_environment(fsdp, origin, c.warnings);
      if (fsdp.at("fsdp_version") == "2") c.parallelism_settings = ask_parallelism(ask, c.num_processes);
      if (!c.parallelism_settings.empty()) {
        c.other["parallelism_config"] = section_yaml(c.parallelism_settings);
        for (const auto& [variable, value] :
             parallelism_environment(c.parallelism_settings, c.sharding_env, origin, c.warnings))
          c.sharding_env[variable] = value;
      }
    }
  }
  c.use_cpu = kind == kinds[1] ||  // multi-CPU, sharded or not
              (c.distributed_type == "NO" && (gpu_count == 0 || ask.yes_no("Do you want to run your training on CPU only "
                                                                           "(even if a GPU is available)?",
                                                                           false)));
  // No question about gradient accumulation, as in Accelerate: its launcher refuses a file with the
  // top-level gradient_accumulation_steps key this runtime reads (written by hand, or passed as
  // --gradient_accumulation_steps).
  if (asks_precision) {
    c.mixed_precision = ask.choice("Do you wish to use mixed precision?", mixed_precision_choices(), 0);
    c.present.insert("mixed_precision");
  }
  return c;
}

}  // namespace acc

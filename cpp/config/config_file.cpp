#include "config/config_file.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/environment.h"
#include "common/error.h"
#include "common/files.h"
#include "common/options.h"
#include "common/text.h"
#include "common/utf8.h"
#include "common/yaml_json.h"
#include "config/parallelism_config.h"
#include "config/sharding_config.h"
#include "state/process_env.h"

namespace acc {
namespace {

// Keys of Accelerate's ClusterConfig that this runtime does not act on, and why. A value that asks
// for nothing (false, 'no', null, [] or {}) is accepted silently; any other value is warned about.
const std::map<std::string, std::string>& ignored_keys() {
  static const std::map<std::string, std::string> keys = {
      {"deepspeed_config", "distributed_type is not DEEPSPEED"},
      {"fsdp_config", "distributed_type is not FSDP"},
      {"tp_config", "tensor parallelism is not implemented"},
      {"megatron_lm_config", "Megatron-LM is Python-only"},
      {"ipex_config", "IPEX is Python-only"},
      {"mpirun_config", "processes are started by accelerate launch, not mpirun"},
      {"fp8_config", "fp8 is not supported"},
      {"dynamo_config", "torch.compile needs Python"},
      {"downcast_bf16", "TPU only"},
      {"tpu_name", "TPU only"},
      {"tpu_zone", "TPU only"},
      {"tpu_use_cluster", "TPU only"},
      {"tpu_use_sudo", "TPU only"},
      {"tpu_vm", "TPU only"},
      {"tpu_env", "TPU only"},
      {"command_file", "TPU only"},
      {"commands", "TPU only"},
  };
  return keys;
}

// A value that asks for nothing.
bool is_neutral(const YAML::Node& n) {
  if (!n || n.IsNull()) return true;
  if (n.IsSequence()) return n.size() == 0;
  if (n.IsMap()) {  // e.g. Accelerate's `ipex_config: {ipex: false}`
    for (const auto& kv : n)
      if (!is_neutral(kv.second)) return false;
    return true;
  }
  const std::string s = lowercase(n.Scalar());
  return s.empty() || s == "no" || s == "false" || s == "none";
}

// Whether a plain scalar `s` would be read as something other than a string: by YAML 1.2's core
// schema (yaml-cpp), or by PyYAML's YAML 1.1 resolvers (Accelerate reads its config with
// yaml.safe_load), which also take timestamps, sexagesimal and "_"-grouped numbers, ".inf", "<<"
// and the value tag "=".
bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::set<std::string> words = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"};
  if (words.count(lowercase(s))) return true;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end && *end == '\0') return true;
  static const std::regex yaml11(
      R"(^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$)"
      R"(|^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$)"
      R"(|^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?$)"
      R"(|^(?:<<|=)$)");
  return std::regex_match(s, yaml11);
}

// A string as a string: plain where that is safe, else quoted; double-quoted with escapes where it
// holds anything but printable ASCII (PyYAML refuses raw control characters and DEL, and reads
// U+0085, U+2028 and U+2029 as line breaks, which quotes fold).
void emit_string(YAML::Emitter& out, const std::string& s) {
  const bool printable_ascii = std::all_of(s.begin(), s.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte >= 0x20 && byte < 0x7F;
  });
  if (!printable_ascii)
    out << YAML::EscapeNonAscii << YAML::DoubleQuoted << s << YAML::EmitNonAscii;
  else if (needs_quotes(s))
    out << YAML::SingleQuoted << s;
  else
    out << s;  // yaml-cpp quotes it where plain would not parse (": ", a leading "-", ...)
}

// See latin1_escapes_as_utf8: every scalar of a loaded tree in UTF-8, its tag (quoted or not) kept.
void repair_escaped_scalars(YAML::Node n) {
  if (n.IsScalar()) {
    const std::string fixed = latin1_escapes_as_utf8(n.Scalar());
    if (fixed == n.Scalar()) return;
    const std::string tag = n.Tag();
    n = fixed;
    n.SetTag(tag);
  } else if (n.IsSequence()) {
    for (auto item : n) repair_escaped_scalars(item);
  } else if (n.IsMap()) {
    for (auto kv : n) repair_escaped_scalars(kv.second);
  }
}

// Block style throughout (as PyYAML's safe_dump); scalars keep their type: a quoted one stays a
// string, a plain one is written plain.
void emit_node(YAML::Emitter& out, const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: out << YAML::Null; break;
    case YAML::NodeType::Scalar:
      if (n.Tag() == "!") emit_string(out, n.Scalar());
      else out << n.Scalar();
      break;
    case YAML::NodeType::Sequence:
      if (n.size() == 0) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::Block << YAML::BeginSeq;
      for (const auto& item : n) emit_node(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Map: {
      if (n.size() == 0) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      std::map<std::string, YAML::Node> sorted;
      for (const auto& kv : n) sorted[kv.first.as<std::string>()] = kv.second;
      out << YAML::Block << YAML::BeginMap;
      for (const auto& kv : sorted) {
        out << YAML::Key << kv.first << YAML::Value;
        emit_node(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    }
  }
}

// A config file is a few dozen values. Aliases make a YAML tree a graph whose expansion can grow
// exponentially with the text ("billion laughs"): walk it as its readers will, expanded, and stop
// at a bound on nodes and on depth.
constexpr int64_t kMaxConfigNodes = 100000;
constexpr int kMaxConfigDepth = 64;

void count_nodes(const YAML::Node& n, int depth, int64_t& seen, const std::string& origin) {
  if (++seen > kMaxConfigNodes)
    fail(Status::InvalidArgument, origin, ": the config expands to more than ", kMaxConfigNodes,
         " values (aliases of aliases?); a config file is a mapping of a few dozen keys");
  if (depth > kMaxConfigDepth)
    fail(Status::InvalidArgument, origin, ": the config is nested deeper than ", kMaxConfigDepth, " levels");
  if (n.IsSequence())
    for (const auto& item : n) count_nodes(item, depth + 1, seen, origin);
  else if (n.IsMap())
    for (const auto& kv : n) {
      if (!kv.first.IsScalar())
        fail(Status::InvalidArgument, origin, ":", kv.first.Mark().line + 1, ": a key must be a name, got ",
             kv.first.IsMap()        ? "a mapping"
             : kv.first.IsSequence() ? "a list"
                                     : "nothing",
             " (fix the file, or write a new one with `accelerate config`)");
      count_nodes(kv.first, depth + 1, seen, origin);
      count_nodes(kv.second, depth + 1, seen, origin);
    }
}

std::string node_text(const YAML::Node& n) {
  YAML::Emitter out;
  emit_node(out, n);
  return out.c_str();
}

// Reads typed values, naming the file, line and key in every error.
struct Reader {
  std::string origin;

  [[noreturn]] void bad(const YAML::Node& n, const std::string& key, const std::string& expected) const {
    const std::string got = n.IsScalar() ? "'" + n.Scalar() + "'" : std::string(n.IsMap() ? "a mapping" : "a list");
    fail(Status::InvalidArgument, origin, ":", n.Mark().line + 1, ": ", key, " must be ", expected, ", got ", got,
         " (fix the file, or write a new one with `accelerate config`)");
  }
  std::string text(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) bad(n, key, "a single value");
    return n.Scalar();
  }
  std::string choice(const YAML::Node& n, const std::string& key, const std::vector<std::string>& allowed) const {
    const std::string v = text(n, key);
    std::string list;
    for (const auto& a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + a;
    }
    bad(n, key, "one of " + list);
  }
  bool flag(const YAML::Node& n, const std::string& key) const {
    auto v = parse_bool(text(n, key));
    if (!v) bad(n, key, "true or false");
    return *v;
  }
  int integer(const YAML::Node& n, const std::string& key, long min, long max) const {
    const std::string s = text(n, key);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || v < min || v > max)
      bad(n, key, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
    // YAML 1.1, which Accelerate's reader follows, reads 010 as octal 8: the file means another number.
    const size_t digits = s.find_first_not_of("+-");
    if (digits != std::string::npos && s[digits] == '0' && s.size() > digits + 1)
      bad(n, key, "written without a leading zero (Accelerate reads it as an octal number)");
    return static_cast<int>(v);
  }
};

// Reads a key this runtime acts on into its field; false for any other key.
bool read_typed(ClusterConfig& c, const Reader& r, const std::string& key, const YAML::Node& v) {
  if (key == "compute_environment") {
    c.compute_environment = r.text(v, key);
    if (c.compute_environment != "LOCAL_MACHINE")
      r.bad(v, key, "LOCAL_MACHINE (this runtime launches on machines it runs on; SageMaker is not supported)");
  } else if (key == "distributed_type") {
    c.distributed_type = r.choice(v, key, {"NO", "MULTI_CPU", "MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM"});
    if (c.distributed_type == "MEGATRON_LM")
      c.warnings.push_back("distributed_type MEGATRON_LM is not supported; data parallelism (MULTI_GPU, or MULTI_CPU "
                           "with use_cpu) is used");
  } else if (key == "mixed_precision") {
    // PyYAML reads an unquoted `no` as false; Accelerate turns that back into "no", and its launcher
    // takes any case (args.mixed_precision.lower()).
    const std::string s = lowercase(r.text(v, key));
    c.mixed_precision = parse_bool(s) == false ? "no" : s;
    if (!is_mixed_precision(c.mixed_precision))
      r.bad(v, key, "one of no, fp16, bf16 (fp8 is not supported)");
  } else if (key == "use_cpu") {
    c.use_cpu = r.flag(v, key);
  } else if (key == "debug") {
    c.debug = r.flag(v, key);
  } else if (key == "num_processes") {
    // -1 is Accelerate's "not set" (a config for SLURM and the like): --num_processes gives it.
    c.num_processes = r.integer(v, key, -1, 1 << 20);
    if (c.num_processes == 0) r.bad(v, key, "an integer from 1 to " + std::to_string(1 << 20) + ", or -1 (not set)");
  } else if (key == "machine_rank") {
    c.machine_rank = r.integer(v, key, 0, 1 << 20);
  } else if (key == "num_machines") {
    c.num_machines = r.integer(v, key, 1, 1 << 20);
  } else if (key == "gpu_ids") {
    const std::string s = r.text(v, key);
    bool ok = s == "all" || (!s.empty() && s.find_first_not_of("0123456789, ") == std::string::npos);
    if (!ok) r.bad(v, key, "all or a comma-separated list of GPU ids");
    c.gpu_ids = s;
  } else if (key == "main_process_ip") {
    c.main_process_ip = r.text(v, key);
  } else if (key == "main_process_port") {
    c.main_process_port = r.integer(v, key, 0, 65535);
  } else if (key == "rdzv_backend") {
    c.rdzv_backend = r.text(v, key);
    if (c.rdzv_backend != "static")
      c.warnings.push_back("rdzv_backend " + c.rdzv_backend +
                           " is ignored: processes meet at main_process_ip:main_process_port (static)");
  } else if (key == "same_network") {
    c.same_network = r.flag(v, key);
  } else if (key == "main_training_function") {
    c.main_training_function = r.text(v, key);  // names a Python function: no meaning here
  } else if (key == "enable_cpu_affinity") {
    c.enable_cpu_affinity = r.flag(v, key);
  } else if (key == "gradient_accumulation_steps") {
    c.gradient_accumulation_steps = r.integer(v, key, 1, 1 << 30);
  } else {
    return false;
  }
  c.present.insert(key);
  return true;
}

}  // namespace

std::string config_cache_dir() { return huggingface_home() + "/accelerate"; }

std::string default_config_path() { return config_cache_dir() + "/default_config.yaml"; }

std::optional<std::string> find_config_file(const std::optional<std::string>& explicit_path, bool default_file) {
  auto is_file = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  // What a path that is not a regular file is: missing, or something else.
  auto what_it_is = [](const std::string& p) -> std::string {
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) return "does not exist";
    return S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file";
  };
  if (explicit_path) {
    if (!is_file(*explicit_path))
      fail(Status::InvalidArgument, "config file ", *explicit_path, " ", what_it_is(*explicit_path),
           ": pass an existing file to --config_file, or create it with `accelerate config --config_file ",
           *explicit_path, "`");
    return explicit_path;
  }
  // Set by the launcher for a job without a config file: none is looked for.
  if (const char* none = std::getenv("ACCELERATE_NO_CONFIG_FILE"); none && *none) return std::nullopt;
  if (const char* from_env = std::getenv("ACCELERATE_CONFIG_FILE"); from_env && *from_env) {
    if (!is_file(from_env))
      fail(Status::InvalidArgument, "ACCELERATE_CONFIG_FILE=", from_env, " ", what_it_is(from_env),
           ": point it at an existing config file or unset it");
    return std::string(from_env);
  }
  const std::string path = default_config_path();
  if (default_file && is_file(path)) return path;
  return std::nullopt;
}

namespace {

// The text as YAML reads it: a character PyYAML's reader refuses (C0 controls but tab, line feed
// and carriage return; DEL) is refused naming its line, where yaml-cpp would take a NUL as an
// escape and change what the file says; line breaks of carriage returns alone or with line feeds
// become line feeds, as YAML's reader normalises them (yaml-cpp keeps a lone '\r' in the value).
std::string yaml_text(const std::string& text, const std::string& origin) {
  int64_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++line;
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      fail(Status::InvalidArgument, origin, ":", line, ": the control character ", code,
           " is not allowed in YAML (write it escaped in a quoted string)");
    }
  }
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out += text[i];
    } else {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    }
  }
  return out;
}

}  // namespace

ClusterConfig parse_config_text(const std::string& raw_text, const std::string& origin) {
  const std::string text = yaml_text(raw_text, origin);
  YAML::Node root;
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    // PyYAML's safe_load, Accelerate's reader, refuses a second document instead of taking the first.
    if (documents.size() > 1)
      fail(Status::InvalidArgument, origin, ":", documents[1].Mark().line + 1, ": a second YAML document (after ",
           "'---'); a config file holds one");
    if (!documents.empty()) root = documents[0];
  } catch (const YAML::Exception& e) {
    fail(Status::InvalidArgument, origin, ":", e.mark.line + 1, ": not valid YAML (", e.msg,
         "); fix it, or write a new one with `accelerate config`");
  }
  int64_t nodes = 0;
  count_nodes(root, 0, nodes, origin);
  repair_escaped_scalars(root);
  if (!root.IsMap())
    fail(Status::InvalidArgument, origin, ": a config file is a mapping of keys to values (",
         root.IsNull() ? "this one is empty" : "this one is not", "); write one with `accelerate config`");
  Reader reader{origin};
  ClusterConfig c;
  std::map<std::string, YAML::Node> entries;
  for (const auto& kv : root) entries[kv.first.as<std::string>()] = kv.second;
  // Older files, converted as Accelerate converts them: fp16 -> mixed_precision, dynamo_backend -> dynamo_config.
  if (auto it = entries.find("fp16"); it != entries.end()) {
    if (!entries.count("mixed_precision") && reader.flag(it->second, "fp16")) entries["mixed_precision"] = YAML::Node("fp16");
    entries.erase(it);
  }
  if (auto it = entries.find("dynamo_backend"); it != entries.end()) {
    const std::string backend = reader.text(it->second, "dynamo_backend");
    YAML::Node dynamo(YAML::NodeType::Map);
    if (lowercase(backend) != "no") dynamo["dynamo_backend"] = backend;
    entries["dynamo_config"] = dynamo;
    entries.erase(it);
  }
  if (!entries.count("distributed_type"))
    fail(Status::InvalidArgument, origin, ": distributed_type is missing (NO, MULTI_CPU or MULTI_GPU)");
  // The sharding section that distributed_type selects becomes the launcher's variables.
  const std::string type = entries.at("distributed_type").IsScalar() ? entries.at("distributed_type").Scalar() : "";
  const std::string section = type == "FSDP" ? "fsdp_config" : type == "DEEPSPEED" ? "deepspeed_config" : "";
  std::vector<std::string> unknown;
  std::optional<std::string> multinode_launcher;  // none: pdsh, Accelerate's default
  for (const auto& [key, value] : entries) {
    if (value.IsNull() && key != "distributed_type") continue;  // Accelerate's None: not set
    if (read_typed(c, reader, key, value)) continue;
    if (key == "mpirun_config" && value.IsMap() && value["mpirun_hostfile"] && value["mpirun_hostfile"].IsScalar() &&
        !value["mpirun_hostfile"].Scalar().empty())
      fail(Status::Unsupported, origin, ":", value["mpirun_hostfile"].Mark().line + 1,
           ": mpirun_config.mpirun_hostfile is not supported: Accelerate's launcher starts the processes on that ",
           "file's hosts through mpirun; start them with mpirun yourself (the library reads its variables), or run ",
           "accelerate launch on each machine with its machine_rank");
    if (key == "parallelism_config") {
      c.other[key] = node_text(value);
      if (!value.IsMap()) reader.bad(value, key, "a mapping of settings");
      for (const auto& kv : value)
        if (!kv.second.IsNull())
          c.parallelism_settings[kv.first.as<std::string>()] =
              kv.second.IsScalar() ? kv.second.Scalar() : node_text(kv.second);
      continue;
    }
    if (key == section) {
      c.other[key] = node_text(value);
      if (!value.IsMap()) reader.bad(value, key, "a mapping of settings");
      SettingMap settings;
      for (const auto& kv : value) {
        if (kv.second.IsNull()) continue;  // Accelerate's None: not set
        settings[kv.first.as<std::string>()] = kv.second.IsScalar() ? kv.second.Scalar() : node_text(kv.second);
      }
      if (settings.count("deepspeed_multinode_launcher")) multinode_launcher = settings["deepspeed_multinode_launcher"];
      c.sharding_env = type == "FSDP" ? fsdp_environment(settings, origin + ": " + key, c.warnings)
                                      : deepspeed_environment(settings, origin + ": " + key, c.warnings);
      c.sharding_settings = std::move(settings);
      continue;
    }
    c.other[key] = node_text(value);
    auto known = ignored_keys().find(key);
    if (known == ignored_keys().end()) unknown.push_back(key);
    else if (!is_neutral(value)) c.warnings.push_back(key + " is ignored (" + known->second + ")");
  }
  // On several machines Accelerate's launcher hands a DeepSpeed job to DeepSpeed's own launcher (pdsh
  // and the others start every machine from this one), except with "standard": one launch per
  // machine, as here. This launcher would start this machine's share and wait for the others.
  if (type == "DEEPSPEED" && c.num_machines > 1 && multinode_launcher.value_or("pdsh") != "standard")
    fail(Status::Unsupported, origin, ": deepspeed_config.deepspeed_multinode_launcher = ",
         multinode_launcher.value_or("pdsh"), multinode_launcher ? "" : " (Accelerate's default)", " on ", c.num_machines, " machines is not supported: it starts every machine's processes from this one; ",
         "set it to standard and run accelerate launch on each machine with its machine_rank");
  if (!section.empty() && c.sharding_env.empty()) {  // the section is missing: Accelerate's defaults
    c.sharding_env = type == "FSDP" ? fsdp_environment({}, origin, c.warnings) : deepspeed_environment({}, origin, c.warnings);
  }
  if (!c.parallelism_settings.empty())
    for (const auto& [variable, value] :
         parallelism_environment(c.parallelism_settings, c.sharding_env, origin + ": parallelism_config", c.warnings))
      c.sharding_env[variable] = value;
  if (!unknown.empty()) {
    std::string list;
    for (const auto& k : unknown) list += (list.empty() ? "" : ", ") + k;
    c.warnings.push_back("unknown keys are ignored: " + list + " (a typo, or a newer Accelerate?)");
  }
  // Missing, it is Accelerate's default, -1: not set (accelerate launch --num_processes gives it).
  if (!c.present.count("num_processes") && c.distributed_type != "NO") c.num_processes = -1;
  if (c.machine_rank >= c.num_machines)
    fail(Status::InvalidArgument, origin, ": machine_rank (", c.machine_rank, ") must be less than num_machines (",
         c.num_machines, ")");
  if (c.num_processes != -1 && c.num_processes % c.num_machines != 0)
    fail(Status::InvalidArgument, origin, ": num_processes (", c.num_processes, ") must be a multiple of num_machines (",
         c.num_machines, ")");
  return c;
}

ClusterConfig load_config_file(const std::string& path) {
  constexpr uintmax_t kMaxConfigBytes = 1 << 20;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxConfigBytes)
    fail(Status::InvalidArgument, "config file ", path, " is ", size, " bytes; a config file is at most ",
         kMaxConfigBytes, " (is this the right file?)");
  const auto text = read_whole_file(path);
  if (!text)
    fail(Status::Io, "cannot read config file ", path, ": ", std::strerror(errno),
         " (fix its permissions, or pass another file with --config_file)");
  return parse_config_text(*text, path);
}

std::string config_to_yaml(const ClusterConfig& c) {
  // Every key as a node, then written sorted, as Accelerate's writer (PyYAML, sort_keys) does.
  std::map<std::string, std::function<void(YAML::Emitter&)>> values;
  auto str = [&](const std::string& key, const std::string& v) {
    values[key] = [v](YAML::Emitter& out) { emit_string(out, v); };
  };
  auto boolean = [&](const std::string& key, bool v) { values[key] = [v](YAML::Emitter& out) { out << v; }; };
  auto integer = [&](const std::string& key, int v) { values[key] = [v](YAML::Emitter& out) { out << v; }; };
  for (const auto& [key, text] : c.other) {
    YAML::Node node = YAML::Load(text);
    if (node.IsNull() || (node.IsMap() && node.size() == 0)) continue;  // Accelerate drops None and {}
    values[key] = [node](YAML::Emitter& out) { emit_node(out, node); };
  }
  str("compute_environment", c.compute_environment);
  str("distributed_type", c.distributed_type);
  // Accelerate's None (a file without the key, a DeepSpeed JSON config's precision) stays unwritten:
  // its launcher takes a written value for a setting beside deepspeed_config_file and refuses it.
  if (c.present.count("mixed_precision") || c.mixed_precision != "no") str("mixed_precision", c.mixed_precision);
  boolean("use_cpu", c.use_cpu);
  boolean("debug", c.debug);
  integer("num_processes", c.num_processes);
  integer("machine_rank", c.machine_rank);
  integer("num_machines", c.num_machines);
  if (c.gpu_ids) str("gpu_ids", *c.gpu_ids);
  if (c.main_process_ip) str("main_process_ip", *c.main_process_ip);
  if (c.main_process_port) integer("main_process_port", *c.main_process_port);
  str("rdzv_backend", c.rdzv_backend);
  boolean("same_network", c.same_network);
  str("main_training_function", c.main_training_function);
  boolean("enable_cpu_affinity", c.enable_cpu_affinity);
  if (c.gradient_accumulation_steps) integer("gradient_accumulation_steps", *c.gradient_accumulation_steps);
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [key, write] : values) {
    out << YAML::Key << key << YAML::Value;
    write(out);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void save_config_file(const ClusterConfig& c, const std::string& path, bool json_text) {
  std::string text = config_to_yaml(c);
  if (json_text || (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0))
    text = yaml_to_json(YAML::Load(text), path).dump(2) + "\n";
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail(Status::Io, "cannot create directory ", parent.string(), " for the config file: ", ec.message());
  write_file_atomically(path, text);
}

void add_cluster_config_defaults(ClusterConfig& c) {
  for (const char* key : {"downcast_bf16", "tpu_use_cluster", "tpu_use_sudo"}) c.other.emplace(key, "false");
}

ClusterConfig default_cluster_config(const std::string& mixed_precision, int gpu_count) {
  require(is_mixed_precision(mixed_precision), "--mixed_precision must be no, fp16 or bf16, got '", mixed_precision, "'");
  ClusterConfig c;
  c.mixed_precision = mixed_precision;
  c.use_cpu = gpu_count == 0;
  c.num_processes = gpu_count > 0 ? gpu_count : 1;
  c.distributed_type = gpu_count > 1 ? "MULTI_GPU" : "NO";
  add_cluster_config_defaults(c);
  for (const char* key : {"compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
                          "num_processes", "machine_rank", "num_machines", "rdzv_backend", "same_network",
                          "main_training_function", "enable_cpu_affinity"})
    c.present.insert(key);
  return c;
}

void report_config_warnings(const ClusterConfig& config, const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  if (config.warnings.empty() || !reported.insert(path).second) return;
  for (const auto& w : config.warnings) std::fprintf(stderr, "accelerate: warning: %s: %s\n", path.c_str(), w.c_str());
}

namespace {

// Whether a launcher other than ours started this process: Accelerate's (which passes
// ACCELERATE_MIXED_PRECISION on every path), torchrun (TORCHELASTIC_RUN_ID), or mpirun / srun /
// a script with several processes. That launcher passed what it read; its --config_file is not
// known here, and the default file may not be the job's (Accelerate's processes read none).
// (Ours passes ACCELERATE_CONFIG_FILE or ACCELERATE_NO_CONFIG_FILE, which find_config_file takes first.)
bool started_by_another_launcher() {
  for (const char* name : {"ACCELERATE_MIXED_PRECISION", "TORCHELASTIC_RUN_ID"})
    if (std::getenv(name)) return true;
  return detect_process_env().world_size > 1;
}

}  // namespace

std::optional<ClusterConfig> implicit_config() {
  auto path = find_config_file(std::nullopt, /*default_file=*/!started_by_another_launcher());
  if (!path) return std::nullopt;
  ClusterConfig config;
  try {
    config = load_config_file(*path);
  } catch (const Error& e) {
    // Found without being asked for: say where it came from and how to get out of its way.
    fail(e.status(), e.what(), " [the Accelerator reads this config file for options the program did not set;"
                               " set HF_HOME or ACCELERATE_CONFIG_FILE to use another]");
  }
  const bool main_process = detect_process_env().rank == 0;  // torchrun, MPI or SLURM alike
  if (main_process && !std::getenv("ACCELERATE_CONFIG_REPORTED")) report_config_warnings(config, *path);
  return config;
}

}  // namespace acc

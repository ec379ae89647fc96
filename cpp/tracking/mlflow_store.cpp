#include "tracking/mlflow_store.h"

#include <pwd.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "common/error.h"
#include "common/files.h"
#include "common/system_random.h"
#include "common/text.h"
#include "common/utf8.h"

namespace acc::tracking::mlflow {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDefaultExperimentId = "0";
constexpr size_t kMaxMetaBytes = 1 << 20;  // a meta.yaml is a few hundred bytes

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ' ' || c == '/';
}

// MLflow's experiment ids: a positive integer below 2^63 (its _generate_unique_integer_id).
std::string random_experiment_id() {
  const uint64_t id = system_random_bits() & ((uint64_t{1} << 63) - 1);
  return std::to_string(id == 0 ? 1 : id);
}

// file:///a%20b -> /a b (a path as it is).
std::string percent_decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// pathlib's as_uri(): file:// and the absolute path, bytes outside the unreserved set and '/' as %XX.
std::string file_uri(const std::string& path) {
  std::string out = "file://";
  char hex[4];
  for (const char ch : fs::absolute(path).lexically_normal().string()) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += ch;
    } else {
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// The folders in `dir` (none where it is absent); Io where it cannot be listed.
std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code kind;
    if (it->is_directory(kind)) out.push_back(it->path());
  }
  if (ec) fail(Status::Io, "mlflow: cannot list ", dir.string(), ": ", ec.message());
  return out;
}

// A meta.yaml's mapping; nullopt where it is missing or not one (MLflow skips such folders).
std::optional<YAML::Node> read_meta(const fs::path& dir) {
  const fs::path path = dir / "meta.yaml";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kMaxMetaBytes) return std::nullopt;
  const auto text = read_whole_file(path.string());
  if (!text) return std::nullopt;
  try {
    YAML::Node node = YAML::Load(*text);
    if (node.IsMap()) return node;
  } catch (const YAML::Exception&) {
  }
  return std::nullopt;
}

std::string scalar(const YAML::Node& meta, const char* key) {
  const YAML::Node value = meta[key];
  return value && value.IsScalar() ? value.Scalar() : std::string();
}

std::optional<int64_t> integer(const YAML::Node& meta, const char* key) {
  const YAML::Node value = meta[key];
  if (!value || !value.IsScalar()) return std::nullopt;
  return parse_integer(value.Scalar());
}

void write_experiment_meta(const fs::path& dir, const std::string& id, const std::string& name,
                           const std::string& artifact_location, int64_t created) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "artifact_location" << YAML::Value << YAML::DoubleQuoted << artifact_location;
  out << YAML::Key << "creation_time" << YAML::Value << created;
  out << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << id;
  out << YAML::Key << "last_update_time" << YAML::Value << created;
  out << YAML::Key << "lifecycle_stage" << YAML::Value << "active";
  out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << name;
  out << YAML::EndMap;
  write_file_atomically((dir / "meta.yaml").string(), std::string(out.c_str()) + "\n");
}

// A tag or parameter's file: the value alone, no line end (MLflow reads the file whole).
void write_value(const fs::path& folder, const std::string& name, const std::string& value) {
  const fs::path path = folder / name;
  make_folders(path.parent_path().string(), "the mlflow folder");
  write_file_atomically(path.string(), value);
}

}  // namespace

void check_name(const std::string& what, const std::string& name) {
  require(!name.empty(), "mlflow: a ", what, " needs a name");
  require(name.size() <= kMaxKeyLength, "mlflow: the ", what, " '", name, "' is longer than MLflow's ", kMaxKeyLength,
          " characters");
  for (const char c : name)
    require(is_name_char(c), "mlflow: the ", what, " '", name, "' has a character MLflow refuses (names may only ",
            "contain ASCII letters and digits, '_', '-', '.', ' ' and '/')");
  // posixpath.normpath(name) must give the name back: MLflow stores it as a relative file path.
  bool same = name.front() != '/' && name.back() != '/';
  for (size_t start = 0; same;) {
    const size_t end = name.find('/', start);
    // A view: this runs on the training thread for every name logged.
    const std::string_view part =
        std::string_view(name).substr(start, end == std::string::npos ? std::string::npos : end - start);
    same = !part.empty() && part != "." && part != "..";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  require(same, "mlflow: the ", what, " '", name, "' is not a plain relative path (MLflow keeps each name as a ",
          "file: no leading or trailing '/', no '//', and no '.' or '..' between slashes)");
}

// getpass.getuser(): LOGNAME, USER, LNAME, USERNAME, then the password database.
std::string user_name() {
  for (const char* variable : {"LOGNAME", "USER", "LNAME", "USERNAME"})
    if (const char* value = std::getenv(variable); value && *value && is_utf8(value)) return value;
  if (const passwd* entry = ::getpwuid(::getuid()); entry && entry->pw_name && is_utf8(entry->pw_name))
    return entry->pw_name;
  return "unknown";
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::string> local_path_of(const std::string& uri) {
  if (uri.rfind("file:", 0) != 0) return std::nullopt;
  std::string rest = uri.substr(5);
  if (rest.rfind("//", 0) == 0) {
    rest = rest.substr(2);
    const size_t slash = rest.find('/');
    const std::string host = rest.substr(0, slash);
    if (!host.empty() && host != "localhost") return std::nullopt;
    rest = slash == std::string::npos ? "/" : rest.substr(slash);
  }
  return percent_decoded(rest);
}

std::string store_root(const std::string& logging_dir) {
  const char* uri = std::getenv("MLFLOW_TRACKING_URI");
  if (uri && *uri) {
    const std::string text = uri;
    if (text.rfind("file:", 0) == 0) {
      const auto path = local_path_of(text);
      if (!path)
        fail(Status::Unsupported, "MLFLOW_TRACKING_URI=", text, ": a file: URI on another host is not a local folder");
      require(!path->empty(), "MLFLOW_TRACKING_URI=", text, " names no folder");
      return *path;
    }
    const size_t colon = text.find(':');
    const size_t slash = text.find('/');
    if (colon != std::string::npos && (slash == std::string::npos || colon < slash))
      fail(Status::Unsupported, "MLFLOW_TRACKING_URI=", text, ": the mlflow tracker writes MLflow's file store ",
           "(a folder, or a file: URI); a tracking server or database is not reached from here. Point it at a ",
           "folder and serve it with `mlflow server --backend-store-uri <folder>`, or unset it");
    return text;
  }
  require(!logging_dir.empty(), "log_with \"mlflow\" writes MLflow's file store into <logging_dir>/mlruns: set ",
          "project_dir or logging_dir, or MLFLOW_TRACKING_URI");
  return (fs::path(logging_dir) / "mlruns").string();
}

Store::Store(std::string root) : root_(std::move(root)) {
  std::error_code ec;
  if (fs::exists(root_, ec)) {
    if (!fs::is_directory(root_, ec)) fail(Status::Io, "mlflow: the store ", root_, " is not a folder");
  } else {
    const fs::path default_experiment = fs::path(root_) / kDefaultExperimentId;
    make_folders(default_experiment.string(), "the mlflow folder");
    write_experiment_meta(default_experiment, kDefaultExperimentId, "Default",
                          file_uri((fs::path(root_) / kDefaultExperimentId).string()), now_ms());
  }
  make_folders((fs::path(root_) / ".trash").string(), "the mlflow folder");
}

std::string Store::experiment(const std::string& name, const std::string& artifact_location, const Pairs& tags) {
  std::string found;
  int64_t newest = 0;
  for (const fs::path& dir : subfolders(root_)) {
    if (dir.filename() == ".trash" || dir.filename() == "models") continue;
    const auto meta = read_meta(dir);
    if (!meta || scalar(*meta, "name") != name || scalar(*meta, "lifecycle_stage") != "active") continue;
    const int64_t created = integer(*meta, "creation_time").value_or(0);
    if (found.empty() || created > newest) found = dir.filename().string(), newest = created;
  }
  if (!found.empty()) return found;
  for (const fs::path& dir : subfolders(fs::path(root_) / ".trash")) {
    const auto meta = read_meta(dir);
    if (meta && scalar(*meta, "name") == name)
      fail(Status::InvalidArgument, "mlflow: the experiment '", name, "' exists in deleted state in ", root_,
           " (restore it, or remove it from the store's .trash folder, to log to that name again)");
  }
  std::error_code ec;
  std::string id;
  do id = random_experiment_id();
  while (fs::exists(fs::path(root_) / id, ec));
  const fs::path dir = fs::path(root_) / id;
  make_folders(dir.string(), "the mlflow folder");
  // A path becomes its file: URI (MLflow's resolve_uri_if_local); a URI (s3://...) stays as given.
  const bool is_uri = artifact_location.find("://") != std::string::npos || artifact_location.rfind("file:", 0) == 0;
  write_experiment_meta(dir, id, name,
                        artifact_location.empty() ? file_uri(dir.string())
                        : is_uri                  ? artifact_location
                                                  : file_uri(artifact_location),
                        now_ms());
  for (const auto& [key, value] : tags) write_value(dir / "tags", key, value);
  return id;
}

std::string Store::run_dir(const RunInfo& run) const {
  return (fs::path(root_) / run.experiment_id / run.run_id).string();
}

void Store::write_run_info(const RunInfo& run) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "artifact_uri" << YAML::Value << YAML::DoubleQuoted << run.artifact_uri;
  out << YAML::Key << "deleted_time" << YAML::Value << YAML::Null;
  out << YAML::Key << "end_time" << YAML::Value;
  if (run.end_time)
    out << *run.end_time;
  else
    out << YAML::Null;
  out << YAML::Key << "entry_point_name" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << run.experiment_id;
  out << YAML::Key << "lifecycle_stage" << YAML::Value << run.lifecycle_stage;
  out << YAML::Key << "run_id" << YAML::Value << YAML::SingleQuoted << run.run_id;
  out << YAML::Key << "run_name" << YAML::Value << YAML::DoubleQuoted << run.run_name;
  out << YAML::Key << "run_uuid" << YAML::Value << YAML::SingleQuoted << run.run_id;
  out << YAML::Key << "source_name" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "source_type" << YAML::Value << 4;  // SourceType.LOCAL
  out << YAML::Key << "source_version" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "start_time" << YAML::Value << run.start_time;
  out << YAML::Key << "status" << YAML::Value << run.status;
  out << YAML::Key << "tags" << YAML::Value << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
  out << YAML::Key << "user_id" << YAML::Value << YAML::DoubleQuoted << run.user_id;
  out << YAML::EndMap;
  write_file_atomically((fs::path(run_dir(run)) / "meta.yaml").string(), std::string(out.c_str()) + "\n");
}

RunInfo Store::create_run(const std::string& experiment_id, const std::string& run_name, const Pairs& tags,
                          int64_t start_ms) {
  const auto meta = read_meta(fs::path(root_) / experiment_id);
  require(meta.has_value(), "mlflow: no experiment ", experiment_id, " in ", root_);
  RunInfo run;
  run.run_id = uuid4_hex();
  run.run_name = run_name;
  run.experiment_id = experiment_id;
  run.user_id = user_name();
  run.start_time = start_ms;
  // The experiment's artifact location, then <run id>/artifacts (append_to_uri_path).
  std::string location = scalar(*meta, "artifact_location");
  while (!location.empty() && location.back() == '/') location.pop_back();
  run.artifact_uri = location + "/" + run.run_id + "/artifacts";
  const fs::path dir = run_dir(run);
  for (const char* folder : {"metrics", "params", "artifacts", "tags"})
    make_folders((dir / folder).string(), "the mlflow folder");
  write_run_info(run);
  write_tags(run, tags);
  return run;
}

RunInfo Store::find_run(const std::string& run_id) const {
  require(!run_id.empty() && run_id.size() <= 256 && std::isalnum(static_cast<unsigned char>(run_id[0])),
          "MLFLOW_RUN_ID: '", run_id, "' is not an MLflow run id");
  for (const char c : run_id)
    require(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-', "MLFLOW_RUN_ID: '", run_id,
            "' is not an MLflow run id");
  for (const fs::path& experiment : subfolders(root_)) {
    if (experiment.filename() == ".trash") continue;
    const fs::path dir = experiment / run_id;
    const auto meta = read_meta(dir);
    if (!meta) continue;
    RunInfo run;
    run.run_id = run_id;
    run.run_name = scalar(*meta, "run_name");
    run.experiment_id = scalar(*meta, "experiment_id");
    run.user_id = scalar(*meta, "user_id");
    run.artifact_uri = scalar(*meta, "artifact_uri");
    run.lifecycle_stage = scalar(*meta, "lifecycle_stage");
    run.start_time = integer(*meta, "start_time").value_or(now_ms());
    require(run.experiment_id == experiment.filename().string(), "mlflow: the run ", run_id, " in ", dir.string(),
            " names experiment '", run.experiment_id, "' in its meta.yaml");
    require(run.lifecycle_stage == "active", "mlflow: the run ", run_id, " is deleted (restore it to log to it)");
    run.status = static_cast<int>(integer(*meta, "status").value_or(1));
    run.end_time = integer(*meta, "end_time");
    return run;
  }
  fail(Status::InvalidArgument, "MLFLOW_RUN_ID: no run ", run_id, " in the store ", root_);
}

void check_experiment_name(const std::string& name) {
  require(!name.empty() && name.size() <= kMaxExperimentNameLength && is_utf8(name),
          "mlflow: an experiment name is UTF-8 of 1 to ", kMaxExperimentNameLength, " characters; \"",
          printable_utf8(name), "\" is not");
}

void check_params_and_tags(const Pairs& params, const Pairs& tags) {
  for (const auto& [key, value] : params) {
    check_name("parameter", key);
    require(value.size() <= kMaxParamValueLength, "mlflow: the parameter '", key, "' is longer than ",
            kMaxParamValueLength, " characters");
  }
  for (const auto& [key, value] : tags) {
    check_name("tag", key);
    require(value.size() <= kMaxTagValueLength && is_utf8(value), "mlflow: the tag '", key,
            "' is not UTF-8 of at most ", kMaxTagValueLength, " characters");
  }
}

void Store::check_params_unchanged(const RunInfo& run, const Pairs& params) const {
  for (const auto& [key, value] : params) {
    const fs::path path = fs::path(run_dir(run)) / "params" / key;
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    const auto logged = read_whole_file(path.string());
    require(logged && *logged == value, "mlflow: the run ", run.run_id, " has the parameter '", key,
            "' logged with the value '", logged.value_or("?"), "'; MLflow's parameters never change, and this ",
            "run's configuration gives '", value, "'");
  }
}

void Store::write_params(const RunInfo& run, const Pairs& params) {
  for (const auto& [key, value] : params) write_value(fs::path(run_dir(run)) / "params", key, value);
}

void Store::write_tags(const RunInfo& run, const Pairs& tags) {
  for (const auto& [key, value] : tags) write_value(fs::path(run_dir(run)) / "tags", key, value);
}

}  // namespace acc::tracking::mlflow

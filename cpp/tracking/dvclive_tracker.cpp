#include "tracking/dvclive_tracker.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/text.h"
#include "common/yaml_json.h"
#include "tracking/init_kwargs.h"
#include "common/python_text.h"

namespace acc::tracking {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxReadBytes = size_t{16} << 20;  // a params.yaml, metrics.json or dvc.yaml read back

// The folders under <dir>/plots that a new run empties, and the files it removes (Live's cleanup).
const char* const kPlotFolders[] = {"metrics", "images", "sklearn", "custom"};
const char* const kRunFiles[] = {"metrics.json", "params.yaml", "report.html", "report.md"};

std::vector<std::string> parts_of(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
    parts.push_back(name.substr(start, slash - start));
  parts.push_back(name.substr(start));
  return parts;
}

// A field as Python's csv module writes it with the tab as delimiter (QUOTE_MINIMAL).
std::string tsv_field(const std::string& text) {
  if (text.find_first_of("\t\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// dvclive's env2bool: the variable holds "1", "y", "yes" or "true" somewhere, in any case.
bool env_true(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return false;
  const std::string text = lowercase(value);
  return text.find('1') != std::string::npos || text.find('y') != std::string::npos ||
         text.find("true") != std::string::npos;
}

bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value;
}

// Whether `dir` or a folder above it is a Git or DVC repository, where Live saves experiments.
bool inside_repository(fs::path dir) {
  std::error_code ec;
  for (;;) {
    if (fs::exists(dir / ".git", ec) || fs::exists(dir / ".dvc", ec)) return true;
    if (dir == dir.parent_path()) return false;
    dir = dir.parent_path();
  }
}

// os.path.relpath of two absolute paths, with '/' (what dvc.yaml holds).
std::string relative_to(const fs::path& path, const fs::path& base) {
  return path.lexically_normal().lexically_relative(base.lexically_normal()).generic_string();
}

std::optional<std::string> read_small_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  refuse_unless_regular(path.string());
  if (fs::file_size(path, ec) > kMaxReadBytes)
    fail(Status::InvalidArgument, "dvclive: ", path.string(), " is larger than ", kMaxReadBytes, " bytes");
  auto text = read_whole_file(path.string());
  if (!text) fail(Status::Io, "dvclive: cannot read ", path.string());
  return text;
}

YAML::Node read_yaml(const fs::path& path, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(Status::InvalidArgument, "dvclive: ", path.string(), " is not YAML: ", e.what());
  }
}

// Fails when an existing dvc.yaml holds anything but DVCLive's entries for `dir`: DVCLive merges its
// entries into such a file through DVC's YAML round trip, which keeps the comments and the layout
// that a rewrite here would lose.
void check_dvc_file(const fs::path& dvc_file, const fs::path& dir) {
  const auto text = read_small_file(dvc_file);
  if (!text) return;
  const YAML::Node root = read_yaml(dvc_file, *text);
  if (root.IsNull()) return;
  const std::string ours = relative_to(dir, dvc_file.parent_path()) + "/";
  // A path DVCLive wrote for `dir` (DVCLive's own test: the folder's relative path in it; for a
  // dvc.yaml inside the folder itself, its files' paths).
  auto names_ours = [&](const std::string& path) {
    if (ours != "./") return path.find(ours) != std::string::npos;
    return path == "params.yaml" || path == "metrics.json" || path.rfind("plots/", 0) == 0;
  };
  auto is_ours = [&](const YAML::Node& entry) {
    if (entry.IsScalar()) return names_ours(entry.Scalar());
    if (entry.IsMap() && entry.size() == 1) {
      const YAML::Node key = entry.begin()->first;
      return key.IsScalar() && names_ours(key.Scalar());
    }
    return false;
  };
  bool only_ours = root.IsMap();
  if (only_ours)
    for (const auto& kv : root) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (key == "params" || key == "metrics" || key == "plots") {
        if (!kv.second.IsSequence()) only_ours = false;
        for (const auto& entry : kv.second) only_ours = only_ours && is_ours(entry);
      } else if (key == "artifacts" && kv.second.IsMap()) {
        for (const auto& artifact : kv.second) {
          const YAML::Node path = artifact.second["path"];
          only_ours = only_ours && path && path.IsScalar() && names_ours(path.Scalar());
        }
      } else {
        only_ours = false;
      }
    }
  if (!only_ours)
    fail(Status::Unsupported, "dvclive: ", dvc_file.string(),
         " holds entries of its own (stages, other plots); adding ",
         "DVCLive's to it is not built (DVCLive merges them through DVC's YAML round trip, which keeps its comments): ",
         "give init_kwargs {\"dvclive\": {\"dvcyaml\": \"", (dir / "dvc.yaml").generic_string(), "\"}} or false");
}

// The values of a summary read back (metrics.json), each by its full name, and the groups above them.
void collect_names(const nlohmann::ordered_json& node, const std::string& prefix,
                   std::unordered_set<std::string>& values, std::unordered_set<std::string>& groups) {
  for (const auto& [key, value] : node.items()) {
    const std::string name = prefix.empty() ? key : prefix + "/" + key;
    if (prefix.empty() && key == "step") continue;
    if (value.is_object()) {
      groups.insert(name);
      collect_names(value, name, values, groups);
    } else {
      values.insert(name);
    }
  }
}

}  // namespace

// The writer thread's side of a run.
struct DvcliveTracker::Run {
  fs::path dir, dvc_file;  // dvc_file empty: none
  nlohmann::ordered_json summary = nlohmann::ordered_json::object();
  bool has_params = false;
  bool logged = false;           // a record came: dvc.yaml is written from then on, as Live's next_step writes it
  bool summary_changed = false;  // metrics.json is behind
  bool final = false;            // the run ends: metrics.json and dvc.yaml are written whatever changed
  std::string dvcyaml_written;

  // Live.log_metric's summary: the value at the name's parts (a value replaces a group there).
  void set(const std::string& name, nlohmann::ordered_json value) {
    nlohmann::ordered_json* node = &summary;
    const std::vector<std::string> parts = parts_of(name);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      node = &(*node)[parts[i]];
      if (!node->is_object()) *node = nlohmann::ordered_json::object();
    }
    (*node)[parts.back()] = std::move(value);
  }

  void apply(const Record& r) {
    for (size_t i = 0; i < r.names.size(); ++i) {
      const double v = r.values[i];
      set(r.names[i], std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(python_float_repr(v)));
    }
    for (size_t i = 0; i < r.text_names.size(); ++i) set(r.text_names[i], r.texts[i]);
    summary["step"] = r.step;  // Live.make_summary, at each next_step
    logged = summary_changed = true;
  }

  std::string dvcyaml() const {
    const fs::path base = dvc_file.parent_path();
    YAML::Emitter out;
    out << YAML::BeginMap;
    if (has_params)
      out << YAML::Key << "params" << YAML::Value << YAML::BeginSeq << relative_to(dir / "params.yaml", base)
          << YAML::EndSeq;
    if (!summary.empty())
      out << YAML::Key << "metrics" << YAML::Value << YAML::BeginSeq << relative_to(dir / "metrics.json", base)
          << YAML::EndSeq;
    std::error_code ec;
    if (fs::is_directory(dir / "plots" / "metrics", ec))
      out << YAML::Key << "plots" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
          << relative_to(dir / "plots" / "metrics", base) << YAML::Value << YAML::BeginMap << YAML::Key << "x"
          << YAML::Value << "step" << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
  }

  // metrics.json and dvc.yaml, each through a temporary (a reader polling them never sees half a file).
  void write_out() {
    if (summary_changed || final) {
      write_file_atomically((dir / "metrics.json").string(),
                            summary.dump(4, ' ', true, nlohmann::ordered_json::error_handler_t::replace) + "\n");
      summary_changed = false;
    }
    if (!dvc_file.empty() && (logged || final)) {
      std::string text = dvcyaml();
      if (text != dvcyaml_written) {
        make_folders(dvc_file.parent_path().string(), "the folder of dvc.yaml");
        write_file_atomically(dvc_file.string(), text);
        dvcyaml_written = std::move(text);
      }
    }
  }
};

DvcliveTracker::~DvcliveTracker() {
  try {
    finish();
  } catch (...) {
  }
}

void DvcliveTracker::set_init_kwargs(const nlohmann::json& kwargs) {
  InitKwargs k("dvclive", kwargs);
  std::string dir = k.text("dir").value_or("dvclive");
  require(!dir.empty(), "init_kwargs[\"dvclive\"][\"dir\"] is empty");
  const bool resume = k.boolean("resume").value_or(false);
  if (const auto report = k.value("report")) {
    const bool known = report->is_string() && (*report == "html" || *report == "md" || *report == "notebook");
    if (!known)
      fail(Status::InvalidArgument, "init_kwargs[\"dvclive\"][\"report\"] is \"html\", \"md\", \"notebook\" or null, ",
           "not ", report->dump());
    fail(Status::Unsupported, "init_kwargs[\"dvclive\"][\"report\"]: DVCLive's reports are not built (the metrics' ",
         "tables and dvc.yaml are written; `dvc plots show` makes the report)");
  }
  const bool save_dvc_exp = k.boolean("save_dvc_exp").value_or(true);
  std::optional<std::string> dvcyaml = "dvc.yaml";
  if (k.given("dvcyaml")) {
    const nlohmann::json given = kwargs.at("dvcyaml");
    if (given.is_null() || given == false) {
      dvcyaml.reset();
    } else if (given.is_string() && fs::path(given.get<std::string>()).filename() == "dvc.yaml") {
      dvcyaml = given.get<std::string>();
    } else if (given != true) {
      fail(Status::InvalidArgument, "init_kwargs[\"dvclive\"][\"dvcyaml\"] is a path to a file named dvc.yaml, ",
           "true, false or null, not ", given.dump());
    }
  }
  k.text("exp_name");  // names an experiment, which is not saved here
  k.text("exp_message");
  k.boolean("cache_images");  // caches logged images: DVCLiveTracker logs none
  if (k.boolean("monitor_system").value_or(false))
    fail(Status::Unsupported, "init_kwargs[\"dvclive\"][\"monitor_system\"]: DVCLive's system metrics are not built");
  k.refuse_the_rest();
  // Checked here, on every process alike, rather than where the main process starts the run.
  if (env_set("DVC_ROOT") && env_set("DVC_EXP_BASELINE_REV"))
    fail(Status::Unsupported, "dvclive: running inside `dvc exp run` (DVC_EXP_BASELINE_REV is set) is not built: ",
         "DVCLive adds its files to the experiment's Git commit there");
  if (save_dvc_exp && !env_set("DVC_ROOT") && inside_repository(fs::current_path()))
    fail(Status::Unsupported, "dvclive: saving a DVC experiment (Live's save_dvc_exp, on by default) is not built, ",
         "and ", fs::current_path().string(), " is inside a Git or DVC repository, where DVCLive would save one: give ",
         "init_kwargs {\"dvclive\": {\"save_dvc_exp\": false}} and run `dvc exp save` after training if you want it");
  dir_setting_ = std::move(dir);
  resume_ = resume;
  save_dvc_exp_ = save_dvc_exp;
  dvcyaml_ = std::move(dvcyaml);
}

void DvcliveTracker::check_name(const std::string& name) const {
  const std::vector<std::string> parts = parts_of(name);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    require(!part.empty() && part != "." && part != "..", "dvclive: the name \"", name, "\" has ",
            part.empty() ? "an empty part" : "a \".\" or \"..\" part", " (it names a file in DVCLive's folder)");
    const size_t room = kFileNameMax - (i + 1 == parts.size() ? 4 : 0);  // the last part gets ".tsv"
    require(part.size() <= room, "dvclive: the name \"", name, "\" has a part longer than a file name takes (", room,
            " bytes)");
  }
  require(parts.front() != "step", "dvclive: the name \"", name,
          "\" is taken: \"step\" is metrics.json's own key, the step of the latest values");
}

void DvcliveTracker::start(const std::string&, const nlohmann::json& config) {
  finish();
  // Everything that can be refused is, before any file changes.
  const fs::path cwd = fs::current_path();
  const fs::path dir = (cwd / dir_setting_).lexically_normal();
  const bool resume = resume_ || env_true("DVCLIVE_RESUME");
  if (save_dvc_exp_ && !env_set("DVC_ROOT"))  // outside a repository (set_init_kwargs refused one), as Live says
    std::fprintf(stderr,
                 "accelerate: dvclive: Can't save experiment without a Git Repo.\n"
                 "Create a Git repo (`git init`) and commit (`git commit`).\n");
  const fs::path dvc_file = dvcyaml_ ? (cwd / *dvcyaml_).lexically_normal() : fs::path();
  // The run's start removes <dir>/*dvc.yaml, so such a dvc.yaml is not checked unless the run resumes.
  const bool removed_at_start = !resume && dvc_file.parent_path() == dir;
  if (!dvc_file.empty() && !removed_at_start) check_dvc_file(dvc_file, dir);
  nlohmann::json params = nlohmann::json::object();
  auto run = std::make_shared<Run>();
  std::unordered_set<std::string> values, groups;
  if (resume) {  // Live(resume=True): the parameters and the latest values of the run before
    if (const auto text = read_small_file(dir / "params.yaml")) {
      params = yaml_to_json(read_yaml(dir / "params.yaml", *text), (dir / "params.yaml").string());
      if (params.is_null()) params = nlohmann::json::object();
      require(params.is_object(), "dvclive: ", (dir / "params.yaml").string(), " is not a mapping of parameters");
    }
    if (const auto text = read_small_file(dir / "metrics.json")) {
      run->summary = parse_ordered_json_input(*text, "dvclive: " + (dir / "metrics.json").string());
      require(run->summary.is_object(), "dvclive: ", (dir / "metrics.json").string(), " is not a JSON object");
      collect_names(run->summary, "", values, groups);
    }
  }
  for (const auto& [key, value] : config.items()) params[key] = value;  // Live.log_params: an update

  make_folders(dir.string(), "DVCLive's folder");
  if (!resume) {
    std::error_code ec;
    for (const char* folder : kPlotFolders) {
      fs::remove_all(dir / "plots" / folder, ec);
      if (ec) fail(Status::Io, "dvclive: cannot remove ", (dir / "plots" / folder).string(), ": ", ec.message());
    }
    std::vector<fs::path> files;
    for (const char* file : kRunFiles) files.push_back(dir / file);
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (file.size() >= 8 && file.compare(file.size() - 8, 8, "dvc.yaml") == 0) files.push_back(it->path());
    }
    for (const auto& file : files)
      if (fs::remove(file, ec); ec)
        fail(Status::Io, "dvclive: cannot remove ", file.string(), " of the run before: ", ec.message());
  }
  if (!params.empty()) {
    YAML::Emitter out;
    emit_json_as_yaml(out, params);
    write_file_atomically((dir / "params.yaml").string(), std::string(out.c_str()) + "\n");
  }

  run->dir = dir;
  run->dvc_file = dvc_file;
  run->has_params = !params.empty();
  auto tables = std::make_shared<AppendedFiles>(
      (dir / "plots" / "metrics").string(), ".tsv", "dvclive",
      [](const std::string& name) { return "step\t" + tsv_field(parts_of(name).back()) + "\n"; });
  writer_ = std::make_unique<AsyncFile>(AsyncFile::TasksOwnFiles{}, dir.string(), [tables, run] {
    tables->flush();
    run->write_out();
  });
  dir_ = dir.string();
  dvc_file_ = dvc_file.string();
  values_ = std::move(values);
  groups_ = std::move(groups);
  run_ = std::move(run);
  tables_ = std::move(tables);
}

void DvcliveTracker::take_names(const Record& record) {
  auto known = [&](const std::string& name) { return values_.count(name) > 0; };
  if (std::all_of(record.names.begin(), record.names.end(), known) &&
      std::all_of(record.text_names.begin(), record.text_names.end(), known))
    return;
  std::unordered_set<std::string> values = values_, groups = groups_;
  auto take = [&](const std::string& name) {
    if (values.count(name)) return;
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      if (values.count(name.substr(0, slash)))
        fail(Status::InvalidArgument, "dvclive: \"", name, "\" would put a group in metrics.json where \"",
             name.substr(0, slash), "\" holds a value (DVCLive fails on it too)");
    if (groups.count(name)) {  // a value in place of a group, as DVCLive's summary takes it
      const std::string below = name + "/";
      for (auto* set : {&values, &groups})
        for (auto it = set->begin(); it != set->end();)
          it = it->compare(0, below.size(), below) == 0 ? set->erase(it) : std::next(it);
      groups.erase(name);
    }
    values.insert(name);
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      groups.insert(name.substr(0, slash));
  };
  for (const auto& name : record.names) take(name);
  for (const auto& name : record.text_names) take(name);
  values_ = std::move(values);
  groups_ = std::move(groups);
}

void DvcliveTracker::log(const std::shared_ptr<const Record>& record) {
  if (!writer_) fail(Status::NotInitialized, "the dvclive tracker has not started");
  if (record->of_images || record->of_histogram) return;
  take_names(*record);
  writer_->post([record, run = run_, tables = tables_](std::FILE*&, const std::string&) {
    const std::string step = std::to_string(record->step) + "\t";
    for (size_t i = 0; i < record->names.size(); ++i)
      tables->append(record->names[i], step + python_float_repr(record->values[i]) + "\n");
    for (size_t i = 0; i < record->text_names.size(); ++i)
      tables->append(record->text_names[i], step + tsv_field(record->texts[i]) + "\n");
    run->apply(*record);
  });
}

void DvcliveTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  const std::shared_ptr<Run> run = std::move(run_);
  tables_.reset();  // the writer's tasks hold it until they are done
  writer->post([run](std::FILE*&, const std::string&) { run->final = true; });  // Live.end's sync
  writer->close();
}

}  // namespace acc::tracking

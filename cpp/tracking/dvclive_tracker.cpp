#include "tracking/dvclive_tracker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/python_json.h"
#include "common/python_text.h"
#include "common/text.h"
#include "common/yaml_json.h"
#include "tracking/dvclive_files.h"
#include "tracking/init_kwargs.h"

namespace acc::tracking {
namespace fs = std::filesystem;
using dvclive::parts_of;
using dvclive::tsv_field;
namespace {

// A log_metric keyword (checked already: true, false or None) as Live's `if plot:` reads it:
// absent, its default; None, false.
bool python_flag(const nlohmann::json& kwargs, const char* key, bool absent) {
  const auto it = kwargs.find(key);
  if (it == kwargs.end()) return absent;
  return it->is_boolean() && it->get<bool>();
}

// The folders under <dir>/plots that a new run empties, and the files it removes (Live's cleanup).
const char* const kPlotFolders[] = {"metrics", "images", "sklearn", "custom"};
const char* const kRunFiles[] = {"metrics.json", "params.yaml", "report.html", "report.md"};

// dvclive's env2bool: the variable holds "1", "y", "yes" or "true" somewhere, in any case.
bool env_true(const char* name) {
  const char* value = nonempty_env(name);
  if (!value) return false;
  const std::string text = lowercase(value);
  return text.find('1') != std::string::npos || text.find('y') != std::string::npos ||
         text.find("true") != std::string::npos;
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

}  // namespace

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
  if (nonempty_env("DVC_ROOT") && nonempty_env("DVC_EXP_BASELINE_REV"))
    fail(Status::Unsupported, "dvclive: running inside `dvc exp run` (DVC_EXP_BASELINE_REV is set) is not built: ",
         "DVCLive adds its files to the experiment's Git commit there");
  if (save_dvc_exp && !nonempty_env("DVC_ROOT") && inside_repository(fs::current_path()))
    fail(Status::Unsupported, "dvclive: saving a DVC experiment (Live's save_dvc_exp, on by default) is not built, ",
         "and ", fs::current_path().string(), " is inside a Git or DVC repository, where DVCLive would save one: give ",
         "init_kwargs {\"dvclive\": {\"save_dvc_exp\": false}} and run `dvc exp save` after training if you want it");
  dir_setting_ = std::move(dir);
  resume_ = resume;
  save_dvc_exp_ = save_dvc_exp;
  dvcyaml_ = std::move(dvcyaml);
}

void DvcliveTracker::check_log_kwargs(const nlohmann::json& kwargs, Logged) const {
  InitKwargs k("dvclive", kwargs, "log_kwargs");
  k.boolean("plot");
  k.boolean("timestamp");
  k.refuse_the_rest();
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
  if (save_dvc_exp_ && !nonempty_env("DVC_ROOT"))  // outside a repository (set_init_kwargs refused one), as Live says
    std::fprintf(stderr,
                 "accelerate: dvclive: Can't save experiment without a Git Repo.\n"
                 "Create a Git repo (`git init`) and commit (`git commit`).\n");
  if (nonempty_env("DVC_STUDIO_TOKEN"))  // Live posts each step to DVC Studio where a repository has a Studio token
    std::fprintf(stderr, "accelerate: dvclive: DVC_STUDIO_TOKEN is set, but DVC Studio's live updates are not built: "
                         "this run's files are written, nothing is sent to Studio\n");
  const fs::path dvc_file = dvcyaml_ ? (cwd / *dvcyaml_).lexically_normal() : fs::path();
  // The run's start removes <dir>/*dvc.yaml, so such a dvc.yaml is not checked unless the run resumes.
  const bool removed_at_start = !resume && dvc_file.parent_path() == dir;
  if (!dvc_file.empty() && !removed_at_start) dvclive::check_dvc_file(dvc_file, dir);
  nlohmann::json params = nlohmann::json::object();
  auto run = std::make_shared<dvclive::RunFiles>();
  std::unordered_set<std::string> values, groups;
  if (resume) {  // Live(resume=True): the parameters and the latest values of the run before
    if (const auto text = dvclive::read_small_file(dir / "params.yaml")) {
      params = yaml_to_json(dvclive::read_yaml(dir / "params.yaml", *text), (dir / "params.yaml").string());
      if (params.is_null()) params = nlohmann::json::object();
      require(params.is_object(), "dvclive: ", (dir / "params.yaml").string(), " is not a mapping of parameters");
    }
    if (const auto text = dvclive::read_small_file(dir / "metrics.json")) {
      run->summary = parse_python_json(*text, "dvclive: " + (dir / "metrics.json").string());
      require(run->summary.is_object(), "dvclive: ", (dir / "metrics.json").string(), " is not a JSON object");
      dvclive::collect_names(run->summary, "", values, groups);
      const auto step = run->summary.find("step");
      if (step != run->summary.end() && step->is_number_integer() && step->get<int64_t>() > 0)
        next_step_ = step->get<int64_t>() + 1;
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
  // (a row begins with its step, the header with "step")
  auto tables =
      std::make_shared<AppendedFiles>((dir / "plots" / "metrics").string(), ".tsv", "dvclive", "0123456789-s");
  // The tables keep what the disk refused, and the summary is rewritten whole at each flush: a run
  // goes on once the disk has room.
  writer_ = std::make_unique<AsyncFile>(
      AsyncFile::TasksOwnFiles{}, dir.string(),
      [tables, run] {
        std::exception_ptr failure;
        try {
          tables->flush();
        } catch (...) {
          failure = std::current_exception();
        }
        run->write_out();
        if (failure) std::rethrow_exception(failure);
      },
      AsyncFile::AfterAnError::Retry);
  dir_ = dir.string();
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
  const nlohmann::json kwargs = log_kwargs_of(*record, name_);
  const bool plot = python_flag(kwargs, "plot", true), timestamp = python_flag(kwargs, "timestamp", false);
  // Accelerate's DVCLiveTracker sets live.step only to a step given; Live counts its own otherwise.
  const int64_t step = record->step_given ? record->step : next_step_;
  next_step_ = step + 1;
  writer_->post([record, step, run = run_, tables = tables_, plot, timestamp](std::FILE*&, const std::string&) {
    run->apply(*record, step);
    if (!plot) return;  // Live.log_metric(plot=False): the summary alone
    // Metric.dump's row: timestamp (int(time.time() * 1000)) where asked, step, the value; a new
    // table's header is its first row's columns, as csv.DictWriter writes it.
    const std::string leading =
        (timestamp ? std::to_string(static_cast<int64_t>(std::floor(record->wall_time * 1000))) + "\t" : "") +
        std::to_string(step) + "\t";
    const AppendedFiles::Header header = [timestamp](const std::string& name) {
      return std::string(timestamp ? "timestamp\t" : "") + "step\t" + tsv_field(parts_of(name).back()) + "\n";
    };
    for (size_t i = 0; i < record->names.size(); ++i)
      tables->append(record->names[i], leading + python_float_repr(record->values[i]) + "\n", header);
    for (size_t i = 0; i < record->text_names.size(); ++i)
      tables->append(record->text_names[i], leading + tsv_field(record->texts[i]) + "\n", header);
  });
}

void DvcliveTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  const std::shared_ptr<dvclive::RunFiles> run = std::move(run_);
  tables_.reset();  // the writer's tasks hold it until they are done
  writer->post([run](std::FILE*&, const std::string&) { run->final = true; });  // Live.end's sync
  writer->close();
}

}  // namespace acc::tracking

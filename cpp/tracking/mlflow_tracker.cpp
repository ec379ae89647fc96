#include "tracking/mlflow_tracker.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "common/environment.h"
#include "common/error.h"
#include "common/json_input.h"
#include "common/python_text.h"
#include "common/utf8.h"
#include "tracking/init_kwargs.h"
#include "tracking/mlflow_artifacts.h"
#include "tracking/mlflow_metrics.h"

namespace acc::tracking {
namespace {

// Tags given as a JSON object (or its text, which Accelerate json.loads), each value as str() prints it.
mlflow::Pairs tags_of(const nlohmann::json& given, const char* what) {
  const nlohmann::json parsed = given.is_string() ? parse_json_input(given.get<std::string>(), what) : given;
  require(parsed.is_object(), what, " is a JSON object of tag names to values, not ", parsed.type_name());
  mlflow::Pairs tags;
  for (const auto& [key, value] : parsed.items()) tags.emplace_back(key, python_str(value));
  return tags;
}

// The program, as MLflow's context names the script that runs: mlflow.source.name.
std::string program_path() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : path.string();
}

}  // namespace

MlflowTracker::~MlflowTracker() {
  try {
    finish();
  } catch (...) {
  }
}

void MlflowTracker::set_init_kwargs(const nlohmann::json& kwargs) {
  InitKwargs k("mlflow", kwargs);
  std::string run_name = k.text("run_name").value_or("");
  std::string run_id = k.text("run_id").value_or("");
  const auto tags = k.value("tags");
  mlflow::Pairs parsed = tags ? tags_of(*tags, "init_kwargs[\"mlflow\"][\"tags\"]") : mlflow::Pairs{};
  std::string description = k.text("description").value_or("");
  std::string artifact_location = k.text("logging_dir").value_or("");
  k.boolean("nested_run");
  k.refuse_the_rest();
  require(is_utf8(run_name) && run_name.size() <= mlflow::kMaxTagValueLength, "init_kwargs[\"mlflow\"][\"run_name\"] ",
          "is UTF-8 of at most ", mlflow::kMaxTagValueLength, " bytes");
  require(is_utf8(description) && description.size() <= mlflow::kMaxTagValueLength,
          "init_kwargs[\"mlflow\"][\"description\"] is UTF-8 of at most ", mlflow::kMaxTagValueLength, " bytes");
  run_name_ = std::move(run_name);
  run_id_ = std::move(run_id);
  tags_ = std::move(parsed);
  description_ = std::move(description);
  artifact_location_ = std::move(artifact_location);
}

void MlflowTracker::check_log_kwargs(const nlohmann::json& kwargs, Logged) const {
  InitKwargs k("mlflow", kwargs, "log_kwargs");
  k.integer("timestamp", 0, std::numeric_limits<int64_t>::max());
  k.boolean("synchronous");
  k.refuse("run_id", "the values go to the run that init_trackers started");
  k.refuse("model_id", "MLflow's logged models are not built");
  k.refuse("dataset", "MLflow's datasets are not built");
  k.refuse_the_rest();
}

void MlflowTracker::start(const std::string& project_name, const nlohmann::json& config) {
  finish();
  // Everything that can be refused is, before the store changes.
  const std::string root = mlflow::store_root(logging_dir_);
  const char* experiment_name = nonempty_env("MLFLOW_EXPERIMENT_NAME");
  const char* tags_text = nonempty_env("MLFLOW_TAGS");
  const mlflow::Pairs given_tags = tags_text ? tags_of(nlohmann::json(tags_text), "MLFLOW_TAGS") : tags_;
  // The run's: those given, and the description as MLflow's start_run keeps it.
  mlflow::Pairs run_tags = given_tags;
  if (!description_.empty()) run_tags.emplace_back("mlflow.note.content", description_);
  mlflow::Pairs params;
  for (const auto& [key, value] : config.items()) {
    std::string text = python_str(value);
    if (text.size() > mlflow::kMaxParamValueLength) {
      std::fprintf(stderr,
                   "accelerate: mlflow: the configuration's \"%s\" is left out of the run's parameters: MLflow takes "
                   "values of at most %zu characters (as Accelerate's tracker drops it)\n",
                   key.c_str(), mlflow::kMaxParamValueLength);
      continue;
    }
    params.emplace_back(key, std::move(text));
  }
  mlflow::check_params_and_tags(params, run_tags);
  const std::string experiment_or_project = experiment_name ? experiment_name : project_name;
  mlflow::check_experiment_name(experiment_or_project);

  auto store = std::make_unique<mlflow::Store>(root);
  mlflow::RunInfo run;
  const char* env_run_id = nonempty_env("MLFLOW_RUN_ID");
  if (const std::string run_id = env_run_id ? env_run_id : run_id_; !run_id.empty()) {
    run = store->find_run(run_id);
    store->check_params_unchanged(run, params);
    run.status = 1;  // RUNNING again, as MLflow's start_run(run_id) sets it
    run.end_time.reset();
    store->write_run_info(run);
    store->write_tags(run, run_tags);
  } else {
    const std::string experiment = store->experiment(experiment_or_project, artifact_location_, given_tags);
    mlflow::Pairs tags = run_tags;
    std::string run_name = run_name_.empty() ? project_name : run_name_;
    const std::string program = program_path();
    tags.emplace_back("mlflow.source.type", "LOCAL");
    if (!program.empty() && is_utf8(program) && program.size() <= mlflow::kMaxTagValueLength)
      tags.emplace_back("mlflow.source.name", program);
    tags.emplace_back("mlflow.user", mlflow::user_name());
    const int64_t started = mlflow::now_ms();
    if (run_name_.empty()) run_name += "-" + std::to_string(started);
    tags.emplace_back("mlflow.runName", run_name);
    run = store->create_run(experiment, run_name, tags, started);
  }
  store->write_params(run, params);
  run_dir_ = store->run_dir(run);
  // (a line begins with its timestamp)
  metric_files_ = std::make_shared<AppendedFiles>(run_dir_ + "/metrics", "", "mlflow", "0123456789");
  writer_ = std::make_unique<AsyncFile>(
      AsyncFile::TasksOwnFiles{}, run_dir_, [files = metric_files_] { files->flush(); },
      AsyncFile::AfterAnError::Retry);  // the files keep what the disk refused
  store_ = std::move(store);
  run_ = std::move(run);
}

void MlflowTracker::check_name(const std::string& name) const { mlflow::check_name("metric", name); }

void MlflowTracker::log_artifact(const std::string& local_path, const std::string& artifact_path) {
  if (!writer_) fail(Status::NotInitialized, "the mlflow tracker has not started");
  const auto root = mlflow::local_path_of(run_.artifact_uri);
  if (!root)
    fail(Status::Unsupported, "log_artifact: the run's artifact location ", run_.artifact_uri,
         " is not a local folder; artifacts are copied into file: locations only");
  mlflow::copy_artifact(local_path, artifact_path.empty() ? *root : *root + "/" + artifact_path);
}

void MlflowTracker::log(const std::shared_ptr<const Record>& record) {
  if (!writer_) fail(Status::NotInitialized, "the mlflow tracker has not started");
  if (record->names.empty()) return;  // texts only: MLflow's metrics are numbers
  writer_->post([record, files = metric_files_, name = name_](std::FILE*&, const std::string&) {
    const nlohmann::json& kwargs = log_kwargs_of(*record, name);
    const int64_t timestamp =
        kwargs.value("timestamp", static_cast<int64_t>(record->wall_time * 1000));  // int(time.time() * 1000)
    for (size_t i = 0; i < record->names.size(); ++i)
      files->append(record->names[i], mlflow::metric_line(timestamp, record->values[i], record->step));
  });
}

void MlflowTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  try {
    writer->close();
    metric_files_.reset();  // the writer's tasks are done with it: its files close
  } catch (...) {
    run_.status = 4;  // FAILED: a metric could not be written
    run_.end_time = mlflow::now_ms();
    try {
      store_->write_run_info(run_);
    } catch (...) {
    }
    throw;
  }
  run_.status = 3;  // FINISHED
  run_.end_time = mlflow::now_ms();
  store_->write_run_info(run_);
}

}  // namespace acc::tracking

// log_with "mlflow": Accelerate's MLflowTracker, writing MLflow's file store itself (no MLflow, no
// Python; tracking/mlflow_store.h). init_trackers opens the experiment named MLFLOW_EXPERIMENT_NAME
// or the project name (made if absent, its artifact location the logging folder, as Accelerate's),
// starts a run (or resumes MLFLOW_RUN_ID) with the tags of MLFLOW_TAGS, and logs the configuration's
// top-level keys as parameters, each value as Python's str() prints it (values longer than MLflow's
// limit are left out with a warning, as Accelerate leaves them); every logged number becomes a metric
// line at its step; end_training marks the run FINISHED. Texts and images are not metrics: skipped,
// as Accelerate's tracker skips them.
#pragma once

#include <memory>
#include <string>

#include "tracking/appended_files.h"
#include "tracking/async_file.h"
#include "tracking/mlflow_store.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class MlflowTracker : public Tracker {
 public:
  explicit MlflowTracker(std::string logging_dir) : logging_dir_(std::move(logging_dir)) {}
  ~MlflowTracker() override;
  const std::string& name() const override { return name_; }
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  bool takes_texts() const override { return false; }
  // MLflowTracker's keyword arguments: run_name (a new run's), run_id (a run to resume), tags (an
  // object, or its JSON text), description (the run's note, tag mlflow.note.content), logging_dir (a
  // new experiment's artifact location) and nested_run (taken: a process of this library has no
  // parent run, so MLflow's start_run makes a top-level one). MLFLOW_RUN_ID and MLFLOW_TAGS win over
  // run_id and tags, as in Accelerate.
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  // mlflow.log_metrics' keyword arguments, as Accelerate's log passes them: timestamp (the lines'
  // milliseconds) and synchronous (taken: the lines are written by the tracker's thread either way,
  // and are on disk when the run ends); run_id, model_id and dataset are Unsupported.
  void check_log_kwargs(const nlohmann::json& kwargs, Logged values) const override;
  void check_name(const std::string& name) const override;
  // MLflow's log_artifact / log_artifacts: into the run's artifact location, where it is a local
  // folder (a file: URI); another (s3://...) is Unsupported.
  void log_artifact(const std::string& local_path, const std::string& artifact_path) override;
  void finish() override;
  // The run's folder in the store.
  std::string path() const override { return run_dir_; }

 private:
  const std::string name_ = "mlflow";
  const std::string logging_dir_;
  // From init_kwargs (empty: not given).
  std::string run_name_, run_id_, description_, artifact_location_;
  mlflow::Pairs tags_;
  std::unique_ptr<mlflow::Store> store_;
  mlflow::RunInfo run_;
  std::string run_dir_;
  std::shared_ptr<AppendedFiles> metric_files_;        // used by the writer's tasks only
  std::unique_ptr<AsyncFile> writer_;                  // appends the metric lines
};

}  // namespace acc::tracking

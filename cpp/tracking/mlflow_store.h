// MLflow's file store (what `mlflow.set_tracking_uri("file:...")` and `mlflow ui
// --backend-store-uri` read), written without MLflow: a folder per experiment holding meta.yaml and a
// folder per run, which holds meta.yaml and one file per metric ("<ms> <value> <step>" lines:
// tracking/mlflow_metrics.h), per parameter and per tag (the value alone). Names and limits are MLflow's
// (mlflow/utils/validation.py, mlflow/store/tracking/file_store.py); a name MLflow would refuse, or refuse to read
// back, is refused here before anything is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace acc::tracking::mlflow {

constexpr size_t kMaxKeyLength = 250;             // MAX_ENTITY_KEY_LENGTH
constexpr size_t kMaxParamValueLength = 6000;     // MAX_PARAM_VAL_LENGTH
constexpr size_t kMaxTagValueLength = 5000;       // MAX_TAG_VAL_LENGTH
constexpr size_t kMaxExperimentNameLength = 500;  // MAX_EXPERIMENT_NAME_LENGTH

using Pairs = std::vector<std::pair<std::string, std::string>>;

// InvalidArgument ("<what> '<name>' ...") unless MLflow takes `name` as a metric, parameter or tag
// name: letters, digits, '_', '-', '.', ' ' and '/' (ASCII only here), at most kMaxKeyLength, and
// the same after path normalisation (no leading '/', no empty, '.' or '..' parts, no trailing '/').
void check_name(const std::string& what, const std::string& name);

// InvalidArgument unless MLflow takes the parameters and tags: valid names (check_name), values no
// longer than its limits.
void check_params_and_tags(const Pairs& params, const Pairs& tags);
// InvalidArgument unless `name` is UTF-8 of 1 to kMaxExperimentNameLength characters.
void check_experiment_name(const std::string& name);

// The local path a file: URI names (file:///a%20b, file:/a, file://localhost/a); nullopt for another
// scheme or host.
std::optional<std::string> local_path_of(const std::string& uri);

// The store's folder: MLFLOW_TRACKING_URI when set (a path, or a file: URI), else
// <logging_dir>/mlruns. Another scheme (a tracking server, a database) is Unsupported; neither set is
// InvalidArgument.
std::string store_root(const std::string& logging_dir);

// Milliseconds since the Unix epoch: MLflow's timestamps (get_current_time_millis).
int64_t now_ms();

// Who runs the program, as Python's getpass.getuser() finds it (a run's user_id).
std::string user_name();

// A run's meta.yaml, the fields MLflow's RunInfo reads.
struct RunInfo {
  std::string run_id, run_name, experiment_id, user_id, artifact_uri, lifecycle_stage = "active";
  int64_t start_time = 0;
  std::optional<int64_t> end_time;
  int status = 1;  // RunStatus: RUNNING 1, FINISHED 3, FAILED 4
};

class Store {
 public:
  // Opens the store at `root`, creating it as MLflow does where it is absent (with the "Default"
  // experiment 0 and the .trash folder).
  explicit Store(std::string root);
  const std::string& root() const { return root_; }

  // The id of the active experiment named `name` (the newest, where several are), or of a new one
  // with `artifact_location` (a path or a URI; "" for MLflow's default, the experiment's folder) and
  // `tags`. The caller has checked the name (check_experiment_name) and tags (check_params_and_tags). A
  // deleted experiment of that name is an error, as MLflow's.
  std::string experiment(const std::string& name, const std::string& artifact_location, const Pairs& tags);
  // A new run in the experiment, started at `start_ms`: its meta.yaml and folders, and `tags`
  // (mlflow.runName among them).
  RunInfo create_run(const std::string& experiment_id, const std::string& run_name, const Pairs& tags,
                     int64_t start_ms);
  // An existing run of any experiment (MLFLOW_RUN_ID), as its meta.yaml says; InvalidArgument where
  // the store has none of that id, or it is deleted.
  RunInfo find_run(const std::string& run_id) const;
  // InvalidArgument where the run has one of the parameters logged with another value (MLflow's
  // parameters never change).
  void check_params_unchanged(const RunInfo& run, const Pairs& params) const;
  void write_params(const RunInfo& run, const Pairs& params);
  void write_tags(const RunInfo& run, const Pairs& tags);
  // Rewrites the run's meta.yaml (its status and end time).
  void write_run_info(const RunInfo& run);
  std::string run_dir(const RunInfo& run) const;

 private:
  std::string root_;
};

}  // namespace acc::tracking::mlflow

// log_with "dvclive": Accelerate's DVCLiveTracker, writing DVCLive's files itself (no DVC, no
// Python), where dvclive.Live(dir="dvclive") writes them, relative to the working folder:
//   <dir>/plots/metrics/<name>.tsv  a table per name ("step\t<last part of the name>", a row per value)
//   <dir>/metrics.json              the latest value of each name, nested by the name's '/' parts, and "step"
//   <dir>/params.yaml               the configuration of init_trackers
//   dvc.yaml                        what `dvc metrics show` / `dvc plots show` read: those files
// A run starts by removing what an earlier run left in <dir> (Live's cleanup) unless it resumes.
// Numbers are written as Python's repr prints floats; texts are metrics too, as DVCLive takes str
// values; NaN and infinities as their str(). Saving a DVC experiment (Live's save_dvc_exp, on by
// default, which commits through DVC in a Git repository) is not built: inside a Git or DVC
// repository it must be turned off (Unsupported otherwise); outside one DVCLive itself skips it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "tracking/appended_files.h"
#include "tracking/async_file.h"
#include "tracking/dvclive_files.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class DvcliveTracker : public Tracker {
 public:
  DvcliveTracker() = default;
  ~DvcliveTracker() override;
  const std::string& name() const override { return name_; }
  // Live's keyword arguments: dir, resume (also DVCLIVE_RESUME), dvcyaml (a path ending in
  // "dvc.yaml", or false/null for none), save_dvc_exp, exp_name, exp_message, cache_images (no images
  // here), report (null only: reports are not built) and monitor_system (false only).
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  // Live.log_metric's keyword arguments, as Accelerate's log passes them: plot (false: the latest
  // values in metrics.json only, no table row) and timestamp (false only: a table's time column is not
  // built).
  void check_log_kwargs(const nlohmann::json& kwargs, Logged values) const override;
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  // Names DVCLive would file outside its folder or mix up (empty, "." or ".." parts, a leading or
  // trailing '/', parts too long for a file name) and "step" (metrics.json's own key) are refused.
  void check_name(const std::string& name) const override;
  void finish() override;
  // The run's DVCLive folder.
  std::string path() const override { return dir_; }

 private:
  // Refuses a record whose names would need a value where metrics.json holds a group, or the other
  // way round within the record; then remembers its names.
  void take_names(const Record& record);

  const std::string name_ = "dvclive";
  // From init_kwargs.
  std::string dir_setting_ = "dvclive";
  std::optional<std::string> dvcyaml_ = "dvc.yaml";
  bool resume_ = false, save_dvc_exp_ = true;
  // The run's folder (absolute).
  std::string dir_;
  // The names logged as values, and the groups above them, as metrics.json nests them (caller's side).
  std::unordered_set<std::string> values_, groups_;
  // Live's step: a log without a step takes it, then next_step adds 1; a resumed run goes on from
  // the step its metrics.json holds (one past it, unless it is 0, as Live._init_resume).
  int64_t next_step_ = 0;
  std::shared_ptr<dvclive::RunFiles> run_;  // the writer's
  std::shared_ptr<AppendedFiles> tables_;  // the writer's
  std::unique_ptr<AsyncFile> writer_;
};

}  // namespace acc::tracking

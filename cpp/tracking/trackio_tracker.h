// log_with "trackio": Accelerate's TrackioTracker (trackio.init(project=<project name>, **init_kwargs),
// then Run.log), writing trackio's local project database itself (tracking/trackio_store.h; no
// Python): a row per logged step in <TRACKIO_DIR>/<project>.db, which `trackio show` and trackio's
// API read, and the run's configuration with its first rows, as trackio stores it. Images (acc_log_images)
// are trackio.Image values: PNG files under <TRACKIO_DIR>/media/<project>/<run>/<step>/; histograms
// (acc_log_histogram) trackio.Histogram values. Rows wait in
// memory and are written by a background thread each second and when the run ends (trackio's own
// sender writes each half second). Logging to a Hugging Face Space or a trackio server, and trackio's
// automatic GPU and CPU metrics, are not built (Unsupported where asked for).
#pragma once

#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tracking/async_file.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class TrackioTracker : public Tracker {
 public:
  TrackioTracker() = default;
  ~TrackioTracker() override;
  const std::string& name() const override { return name_; }
  // trackio.init's keyword arguments: name, group, config, resume ("never", "allow", "must"), and
  // those without effect in a local run (private, embed, settings, the monitors' intervals, webhooks);
  // space_id, server_url, dataset_id, bucket_id and space_storage (also TRACKIO_SPACE_ID and
  // TRACKIO_SERVER_URL), and auto_log_gpu / auto_log_cpu true, are Unsupported.
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  // Project names trackio refuses (trackio_store.h).
  void check_project_name(const std::string& project_name) const override;
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  // As trackio.Image values (what a Python run passes to accelerator.log for trackio).
  bool takes_images() const override { return true; }
  // As trackio.Histogram values: the bins' edges and counts of TensorBoard's histogram (bins and
  // max_bins as acc_log_histogram was given them).
  bool takes_histograms() const override { return true; }
  void finish() override;
  // The project's database.
  std::string path() const override { return path_; }

  struct RunState;  // the writer's

 private:
  // trackio stores a value under a reserved key (or one starting "__") as "__<key>", with a warning
  // (here once per key and run, on the caller's thread).
  void warn_if_reserved(const std::string& key);

  const std::string name_ = "trackio";
  // From init_kwargs.
  std::string run_name_setting_, group_, resume_ = "never";
  bool named_ = false, grouped_ = false;
  nlohmann::json init_config_ = nlohmann::json::object();
  std::string path_;
  std::set<std::string> warned_keys_;
  std::shared_ptr<RunState> run_;
  std::unique_ptr<AsyncFile> writer_;
};

}  // namespace acc::tracking

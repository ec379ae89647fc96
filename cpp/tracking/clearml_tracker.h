// log_with "clearml": Accelerate's ClearMLTracker (Task.init(project_name=..., task_name=...,
// **init_kwargs), connect_configuration, Logger.report_scalar / report_single_value / report_image),
// writing the offline session ClearML's SDK writes (tracking/clearml_session.h; no Python, no
// server): Task.import_offline_session(<folder>) (or `clearml-task --import-offline-session`) sends it
// to a ClearML server. Reporting to a server while training (CLEARML_OFFLINE_MODE set to a false
// value) is not built; without CLEARML_OFFLINE_MODE the session is written offline, and says so.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tracking/async_file.h"
#include "tracking/clearml_session.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class ClearmlTracker : public Tracker {
 public:
  ClearmlTracker() = default;
  ~ClearmlTracker() override;
  const std::string& name() const override { return name_; }
  // Task.init's keyword arguments: project_name and task_name (else CLEARML_PROJECT and CLEARML_TASK,
  // else the project name), task_type, tags; reuse_last_task_id, deferred_init and the auto_connect_*
  // / auto_resource_monitoring switches are taken without effect (nothing to connect from C);
  // continue_last_task and output_uri are Unsupported.
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  bool takes_images() const override { return true; }
  // Image names whose file name ClearML would shorten by a digest (a part over 250 bytes) are refused.
  void check_image_name(const std::string& name) const override;
  // Task.close(): the session is also zipped beside its folder, <folder>.zip.
  void finish() override;
  // The session's folder.
  std::string path() const override { return folder_; }

 private:
  const std::string name_ = "clearml";
  nlohmann::json init_kwargs_ = nlohmann::json::object();
  std::string folder_;
  std::shared_ptr<clearml::OfflineSession> session_;  // the writer's
  std::unique_ptr<AsyncFile> writer_;
};

}  // namespace acc::tracking

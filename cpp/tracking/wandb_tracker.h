// log_with "wandb": Accelerate's WandBTracker (wandb.init(project=<project name>, **init_kwargs), then
// run.log), writing the offline run that wandb.init(mode="offline") writes, itself (no Python, no
// W&B service): `wandb sync <folder>` uploads it to a W&B server (tracking/wandb_run.h). Numbers,
// dicts of numbers (acc_log_scalars: a nested value), texts, images (a list of one wandb.Image per
// name, as Accelerate's log_images logs them) and histograms (wandb.Histogram of TensorBoard's bins).
// Uploading while training (mode "online", "shared") is not built; with no mode given (init_kwargs
// "mode" or WANDB_MODE) the run is written offline, and says so on stderr.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tracking/async_file.h"
#include "tracking/tracker.h"
#include "tracking/wandb_settings.h"

namespace acc::tracking {

namespace wandb {
class OfflineRun;
}

class WandbTracker : public Tracker {
 public:
  WandbTracker() = default;
  ~WandbTracker() override;
  const std::string& name() const override { return name_; }
  // wandb.init's keyword arguments (tracking/wandb_settings.h).
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  // run.log's keyword argument: commit (a boolean).
  void check_log_kwargs(const nlohmann::json& kwargs, Logged values) const override;
  // wandb's rules for project names.
  void check_project_name(const std::string& project_name) const override;
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  bool takes_images() const override { return true; }
  // Names whose media file would have a path part longer than a file name can be are refused.
  void check_image_name(const std::string& name) const override;
  // A batch is a list of images, each a file, as Accelerate's log_images makes them.
  bool takes_images_apart() const override { return true; }
  bool takes_histograms() const override { return true; }
  // wandb.Histogram keeps at most 512 bins (InvalidArgument beyond).
  void check_histogram(const Histogram& histogram) const override;
  // The keys wandb writes itself (_step, _runtime, _timestamp, _wandb), and names under them (a
  // group of acc_log_scalars named so), are refused.
  void check_name(const std::string& name) const override;
  void finish() override;
  // The run's folder ("" with mode "disabled").
  std::string path() const override { return folder_; }

 private:
  const std::string name_ = "wandb";
  std::optional<wandb::RunSettings> settings_;
  std::string folder_;
  std::shared_ptr<wandb::OfflineRun> run_;  // the writer's
  std::unique_ptr<AsyncFile> writer_;
};

}  // namespace acc::tracking

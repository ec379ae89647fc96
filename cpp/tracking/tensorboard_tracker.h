// TensorBoard: an event file per run, <logging_dir>/<project_name>/events.out.tfevents.<time>.<host>.<pid>.<n>,
// that TensorBoard reads as it is. Scalars are Summary simple_values; the hyper-parameters are the
// HParams plugin's session start/end summaries (the HPARAMS dashboard) and a markdown table (TEXT).
// Protos are built, serialized and framed on the file's background thread.
#pragma once

#include <memory>
#include <string>

#include "tracking/async_file.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class TensorBoardTracker : public Tracker {
 public:
  explicit TensorBoardTracker(std::string logging_dir) : logging_dir_(std::move(logging_dir)) {}
  const std::string& name() const override { return name_; }
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  void finish() override;
  std::string path() const override { return path_; }

 private:
  const std::string name_ = "tensorboard";
  std::string logging_dir_, path_;
  std::unique_ptr<AsyncFile> file_;
  bool has_hparams_ = false;  // a session was started: end it in finish()
};

}  // namespace acc::tracking

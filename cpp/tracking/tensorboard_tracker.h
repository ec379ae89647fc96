// TensorBoard: an event file per run, <logging_dir>/<project_name>/events.out.tfevents.<time>.<host>.<pid>.<n>,
// that TensorBoard reads as it is. Scalars are Summary simple_values; the hyper-parameters are the
// HParams plugin's session start/end summaries (the HPARAMS dashboard) and a markdown table (TEXT);
// texts, images, histograms and groups of scalars are written as torch's SummaryWriter.add_text,
// add_images, add_histogram and add_scalars write them.
// Protos are built, serialized and framed on the file's background thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tracking/file_tracker.h"

namespace acc::tracking {

class TensorBoardTracker : public FileTracker {
 public:
  explicit TensorBoardTracker(std::string logging_dir) : FileTracker("tensorboard", std::move(logging_dir)) {}
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  bool takes_images() const override { return true; }
  bool takes_histograms() const override { return true; }
  // SummaryWriter's keyword arguments, as Accelerate passes them: flush_secs (the files' flush
  // interval) and filename_suffix (after each event file's name) are honoured; max_queue (how many
  // events SummaryWriter buffers) and comment (which SummaryWriter ignores beside a log_dir, and
  // Accelerate always gives one) are taken and change nothing here; purge_step starts the run's file
  // with SummaryWriter's session start at that step, from which TensorBoard drops the events of the
  // folder's earlier files (a run resumed after a crash, in the same folder).
  void set_init_kwargs(const nlohmann::json& kwargs) override;
  // add_scalar's keyword arguments, as Accelerate's log passes them: walltime (the events' time, in
  // seconds), new_style (a tensor summary of the scalars plugin instead of a simple value) and
  // double_precision (with new_style: the value as a double); for a group (add_scalars) or texts
  // (add_text), walltime alone.
  void check_log_kwargs(const nlohmann::json& kwargs, Logged values) const override;
  void finish() override;

 private:
  void log_group(const std::shared_ptr<const Record>& record);
  void log_images(const std::shared_ptr<const Record>& record);
  void log_histogram(const std::shared_ptr<const Record>& record);
  bool has_hparams_ = false;  // a session was started: end it in finish()
  std::string filename_suffix_;
  std::chrono::milliseconds flush_interval_ = std::chrono::seconds(1);
  std::optional<int64_t> purge_step_;
  std::string run_dir_;
  // acc_log_scalars' event files, one per folder "<group>_<name>" of the run (add_scalars' writers).
  std::map<std::string, std::unique_ptr<AsyncFile>> group_files_;
};

}  // namespace acc::tracking

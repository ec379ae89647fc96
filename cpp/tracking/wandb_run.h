// One offline W&B run being written, as wandb.init(mode="offline") leaves it for `wandb sync`:
//   <root>/wandb/offline-run-<YYYYMMDD_HHMMSS, local time>-<run id>/run-<run id>.wandb
//   <root>/wandb/offline-run-.../files/media/...   the media files the records name
//   <root>/wandb/latest-run                        a link to the newest run's folder
// The .wandb file holds what wandb's handler would have written (its sync runs no handler): the
// run, its configuration, per step a summary of the run time, a summary of the step's values and
// the step's history, files records for media, and at the end the exit. Log calls are combined into
// steps as the handler combines them: a call with a step larger than the current one first writes
// the current step out; a call without a step (or with commit) writes its step out and moves to the
// next; a smaller step is dropped with a warning. The records wait in memory until write_out appends
// them (framed where the file then ends); what the disk refuses waits for the next write_out (up to
// 64 MiB), so a run goes on once the disk has room, each record whole and once.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracking/tracker.h"
#include "tracking/wandb_settings.h"
#include "tracking/whole_appends.h"

namespace acc::wandbpb {
class Record;  // the generated message (tracking/proto/wandb_record.pb.h)
}

namespace acc::tracking::wandb {

class OfflineRun {
 public:
  // Makes the run's folders, the .wandb file (which must not exist yet) with the run's first records
  // and the latest-run link, on the calling thread: Io errors name what could not be made. `config`
  // is init_trackers' configuration (Accelerate's store_init_configuration).
  OfflineRun(const RunSettings& settings, const std::string& project, const nlohmann::json& config);

  const std::string& folder() const { return folder_; }
  const std::string& log_path() const { return log_path_; }
  const std::string& run_id() const { return run_id_; }

  ~OfflineRun();
  OfflineRun(const OfflineRun&) = delete;
  OfflineRun& operator=(const OfflineRun&) = delete;

  // The rest runs on the writer thread.
  void log(const tracking::Record& record);
  // Queues the last step and the exit record (exit code 0, the run time in whole seconds).
  void finish();
  // Appends the records waiting to the .wandb file. Io where the disk refuses them (kept for the next
  // call) or where a media file could not be written (that image is left out of its step).
  void write_out();

 private:
  // The record numbered next, queued to be written.
  void write(wandbpb::Record& record);
  void write_run_timing();
  // The pending step's values as the handler writes them out; then `next` is the current step.
  void write_step(int64_t next);
  // A PNG file under files/, announced to `wandb sync` by a files record; its path relative to files/,
  // or none where it could not be written (the error is kept for write_out to report).
  std::optional<std::string> add_media_file(const std::string& key, const std::string& png);
  double runtime() const;
  // Whether the step 2^63 - 1 is written out: then what comes is dropped, with a warning.
  bool spent() const;
  // The step after the current one (the current one at the end of int64's range).
  int64_t next_step() const { return step_ == std::numeric_limits<int64_t>::max() ? step_ : step_ + 1; }

  std::string run_id_, folder_, log_path_;
  uint64_t size_ = 0;  // bytes in the .wandb file
  int64_t records_ = 0;
  std::vector<std::string> waiting_;  // serialized records not written yet
  size_t waiting_bytes_ = 0;
  uint64_t dropped_ = 0;     // records dropped (past kMaxWaitingBytes waiting) since the last error
  std::string media_error_;  // the first media file that could not be written since the last error
  int fd_ = -1;              // the .wandb file, opened by the first write_out
  WholeAppends appends_{"record"};
  std::chrono::steady_clock::time_point started_;
  nlohmann::ordered_json pending_ = nlohmann::ordered_json::object();  // the current step's values
  int64_t step_ = 0;
  bool steps_spent_ = false;  // the step 2^63 - 1 is written out
};

}  // namespace acc::tracking::wandb

// One ClearML offline session being written, as ClearML's SDK writes it with Task.set_offline(True)
// (or CLEARML_OFFLINE_MODE), for Task.import_offline_session(<folder>) to send to a ClearML server:
//   <CLEARML_CACHE_DIR or ~/.clearml/cache>/offline/offline-<32 hex>/task.json   the task
//   .../metrics.jsonl                 JSON arrays of events, a line per 100 (or per second, as the
//                                     SDK batches them: the importer sends a line a request)
//   .../data/<key>                    the debug images the events name
// What Accelerate's ClearMLTracker logs: numbers with a step as scalars (title and series from the
// name's "train_"/"eval_"/"test_" prefix), without one as single values, images as debug images
// (iteration 0 without a step); texts and groups of numbers are dropped with a warning, as it drops
// values that are not numbers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracking/tracker.h"
#include "tracking/whole_appends.h"

namespace acc::tracking::clearml {

struct TaskSettings {
  std::string project, name;
  std::string type = "training";
  std::vector<std::string> tags;
};

class OfflineSession {
 public:
  // Makes the session's folder under `cache_dir` and its task.json, with `config` (init_trackers'
  // configuration: Accelerate's connect_configuration) as the configuration "General" unless empty;
  // Io errors name what could not be made.
  OfflineSession(const std::string& cache_dir, const TaskSettings& task, const nlohmann::json& config);

  const std::string& folder() const { return folder_; }
  const std::string& task_id() const { return task_id_; }

  // On the writer thread: the record's events join the batch (written once it holds 100).
  void log(const Record& record);
  // On the writer thread: the batch written out. A failed write leaves the file as it was before
  // the batch (no half line, which the importer would answer by sending the line before it again),
  // and its lines wait for the next flush (up to 64 MiB of them: a run goes on once the disk has
  // room); Io names what the disk refused, a debug image's file included (that image is left out).
  void flush();

 private:
  void write_task(const nlohmann::json& config) const;
  // Adds an event to the batch, a line of its own once it holds 100.
  void add(nlohmann::ordered_json event);
  // The batch as a line waiting to be written (or dropped, counted, past 64 MiB waiting).
  void take_batch();
  // Appends the waiting lines; Io where the disk refuses them (kept).
  void write_unwritten();

  // `value` as ClearML reports it: NaN and infinities as 0.0, with its warning.
  double reported(double value);
  // Accelerate's warning for a value it drops, once per kind and session.
  void warn_dropped(const char* what, const std::string& name, bool& warned);

  TaskSettings task_;
  std::string task_id_, folder_, metrics_path_;
  nlohmann::ordered_json batch_ = nlohmann::ordered_json::array();
  std::string unwritten_;    // whole lines the disk refused, written before the next
  uint64_t dropped_ = 0;     // events dropped (more waited than 64 MiB) since the last error
  std::string image_error_;  // the first image file the disk refused since the last error
  WholeAppends appends_{"line"};
  std::map<std::pair<std::string, std::string>, int64_t> images_;  // debug images per (metric, variant)
  int64_t non_finite_ = 0;
  bool warned_texts_ = false, warned_groups_ = false;
};

}  // namespace acc::tracking::clearml

#include "tracking/clearml_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/system_random.h"
#include "common/utf8.h"
#include "tracking/async_file.h"
#include "tracking/clearml_events.h"

namespace acc::tracking::clearml {
namespace {

// ClearML keeps the last 100 images of each metric and variant, overwriting the oldest (its
// packaged configuration's metrics.file_history_size).
constexpr int64_t kFileHistorySize = 100;
// Events per metrics.jsonl line, as the SDK's batches hold at most.
constexpr size_t kBatchEvents = 100;

// As Python's json.dumps (the SDK's): non-ASCII as \u escapes.
std::string ascii_json(const nlohmann::ordered_json& value) { return value.dump(-1, ' ', true); }

}  // namespace

OfflineSession::OfflineSession(const std::string& cache_dir, const TaskSettings& task, const nlohmann::json& config)
    : task_(task), task_id_("offline-" + uuid4_hex()) {
  folder_ = std::filesystem::absolute(cache_dir + "/offline/" + task_id_).lexically_normal().string();
  metrics_path_ = folder_ + "/metrics.jsonl";
  const std::string key = image_key(task_.project, task_.name, task_id_, "m", "v", 0, ".png");
  check_image_key(key, "the project or task name");
  require(folder_.size() + key.size() + 256 < PATH_MAX, "clearml: the project and task names make the images' ",
          "paths longer than a path can be");
  make_folders(folder_, "the ClearML session's folder");
  try {
    write_task(config);
  } catch (...) {  // no half-made session left behind
    std::error_code ec;
    std::filesystem::remove_all(folder_, ec);
    throw;
  }
}

void OfflineSession::write_task(const nlohmann::json& config) const {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();  // keys sorted, as the SDK writes them
  if (!config.empty())
    json["configuration"]["General"] = {{"name", "General"}, {"type", "dictionary"}, {"value", config.dump(2)}};
  json["execution"] = {{"artifacts", nlohmann::ordered_json::array()},
                       {"docker_cmd", ""},
                       {"model", ""},
                       {"model_desc", nlohmann::ordered_json::object()},
                       {"model_labels", nlohmann::ordered_json::object()},
                       {"parameters", nlohmann::ordered_json::object()}};
  json["id"] = task_id_;
  json["name"] = task_.name;
  json["offline_folder"] = folder_;
  json["offline_output_models"] = nlohmann::ordered_json::array();
  json["output"] = nlohmann::ordered_json::object();
  json["project_name"] = task_.project;
  if (!task_.tags.empty()) json["tags"] = task_.tags;
  json["type"] = task_.type;
  write_file_atomically(folder_ + "/task.json", ascii_json(json));
  write_file(metrics_path_, "");
}

void OfflineSession::take_batch() {
  if (batch_.empty()) return;
  const std::string line = ascii_json(batch_) + "\n";
  if (unwritten_.size() + line.size() <= kMaxWaitingBytes)
    unwritten_ += line;
  else
    dropped_ += batch_.size();
  batch_ = nlohmann::ordered_json::array();
}

void OfflineSession::write_unwritten() {
  if (unwritten_.empty() && !appends_.torn()) return;
  // Opened for each write, as the SDK does (a session folder removed meanwhile is an error, not lines
  // written into a deleted file), and written by one write(2) where the system takes it whole: a
  // process killed meanwhile leaves the lines whole or absent, never half of one.
  const int fd = ::open(metrics_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    fail(Status::Io, "cannot write ", metrics_path_, ": ", std::strerror(errno), lost_so_far(dropped_, "event"));
  std::string error;
  const bool written = appends_.append(fd, metrics_path_, unwritten_, error);
  ::close(fd);
  if (!written)
    fail(Status::Io, error, " (kept, to be written once the disk takes them)", lost_so_far(dropped_, "event"));
  unwritten_.clear();
}

void OfflineSession::flush() {
  take_batch();
  write_unwritten();
  if (!image_error_.empty()) fail(Status::Io, std::exchange(image_error_, std::string()));
}

double OfflineSession::reported(double value) {
  if (std::isfinite(value)) return value;
  if (non_finite_++ % 1000 == 0)
    std::fprintf(stderr, "accelerate: clearml: %s value encountered. Reporting it as '0.0'\n",
                 std::isnan(value) ? "NaN" : "Inf");
  return 0.0;
}

void OfflineSession::warn_dropped(const char* what, const std::string& name, bool& warned) {
  if (warned) return;
  warned = true;
  std::fprintf(stderr,
               "accelerate: clearml: %s \"%s\" is not a number: ClearML's tracker logs numbers only, so it is "
               "dropped (as Accelerate's drops it)\n",
               what, printable_utf8(name).c_str());
}

void OfflineSession::log(const Record& record) {
  const auto timestamp = static_cast<int64_t>(record.wall_time * 1000);
  if (record.of_images) {
    for (size_t i = 0; i < record.images.size(); ++i) {
      const auto [metric, variant] = title_series(record.image_names[i]);
      int64_t& count = images_[{metric, variant}];
      const std::string key =
          image_key(task_.project, task_.name, task_id_, metric, variant, count++ % kFileHistorySize, ".png");
      const std::string file = folder_ + "/data/" + key;
      try {  // replacing the image of 100 before whole (or not at all)
        make_folders(std::filesystem::path(file).parent_path().string(), "a ClearML image folder");
        write_file_atomically(file, record.images[i].png);
      } catch (const std::exception& e) {  // that image is left out; flush reports it
        if (image_error_.empty()) image_error_ = e.what();
        continue;
      }
      add(image_event(timestamp, task_id_, record.step_given ? record.step : 0, metric, variant, key, file));
    }
  } else if (!record.group.empty()) {
    warn_dropped("the group", record.group, warned_groups_);
  }
  for (size_t i = 0; i < record.names.size() && record.group.empty(); ++i) {
    const double value = reported(record.values[i]);
    if (!record.step_given) {  // report_single_value: the whole name
      add(scalar_event(timestamp, task_id_, kSingleValueIteration, "Summary", record.names[i], value));
    } else {
      const auto [metric, variant] = title_series(record.names[i]);
      add(scalar_event(timestamp, task_id_, record.step, metric, variant, value));
    }
  }
  if (!record.text_names.empty()) warn_dropped("the text", record.text_names.front(), warned_texts_);
}

void OfflineSession::add(nlohmann::ordered_json event) {
  batch_.push_back(std::move(event));
  if (batch_.size() >= kBatchEvents) take_batch();  // a line, written by the next flush
}

}  // namespace acc::tracking::clearml

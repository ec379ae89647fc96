#include "tracking/clearml_session.h"

#include <cmath>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/system_random.h"
#include "common/utf8.h"
#include "tracking/async_file.h"
#include "tracking/clearml_events.h"

namespace acc::tracking::clearml {
namespace {

// ClearML keeps the last 5 images of each metric and variant, overwriting the oldest (the
// configuration's metrics.file_history_size).
constexpr int64_t kFileHistorySize = 5;

// As Python's json.dumps (the SDK's): non-ASCII as \u escapes.
std::string ascii_json(const nlohmann::ordered_json& value) { return value.dump(-1, ' ', true); }

}  // namespace

OfflineSession::OfflineSession(const std::string& cache_dir, const TaskSettings& task, const nlohmann::json& config)
    : task_(task), task_id_("offline-" + uuid4_hex()) {
  folder_ = std::filesystem::absolute(cache_dir + "/offline/" + task_id_).lexically_normal().string();
  make_folders(folder_, "the ClearML session's folder");
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
  if (task_.tags_given) json["tags"] = task_.tags;
  json["type"] = task_.type;
  write_file_atomically(folder_ + "/task.json", ascii_json(json));
  write_file(metrics_path(), "");
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

void OfflineSession::log(std::FILE* metrics, const Record& record) {
  const auto timestamp = static_cast<int64_t>(record.wall_time * 1000);
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  if (record.of_images) {
    for (size_t i = 0; i < record.images.size(); ++i) {
      const auto [metric, variant] = title_series(record.image_names[i]);
      int64_t& count = images_[{metric, variant}];
      const std::string key =
          image_key(task_.project, task_.name, task_id_, metric, variant, count++ % kFileHistorySize, ".png");
      const std::string file = folder_ + "/data/" + key;
      make_folders(std::filesystem::path(file).parent_path().string(), "a ClearML image folder");
      write_file(file, record.images[i].png);
      events.push_back(
          image_event(timestamp, task_id_, record.step_given ? record.step : 0, metric, variant, key, file));
    }
  } else if (!record.group.empty()) {
    warn_dropped("the group", record.group, warned_groups_);
  }
  for (size_t i = 0; i < record.names.size() && record.group.empty(); ++i) {
    const double value = reported(record.values[i]);
    if (!record.step_given) {  // report_single_value: the whole name
      events.push_back(scalar_event(timestamp, task_id_, kSingleValueIteration, "Summary", record.names[i], value));
    } else {
      const auto [metric, variant] = title_series(record.names[i]);
      events.push_back(scalar_event(timestamp, task_id_, record.step, metric, variant, value));
    }
  }
  if (!record.text_names.empty()) warn_dropped("the text", record.text_names.front(), warned_texts_);
  if (!events.empty()) write_all(metrics, metrics_path(), ascii_json(events) + "\n");
}

}  // namespace acc::tracking::clearml

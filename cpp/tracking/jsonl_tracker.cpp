#include "tracking/jsonl_tracker.h"

#include <cmath>

#include "common/error.h"
#include "tracking/hparams.h"
#include "tracking/torn_tail.h"

namespace acc::tracking {

namespace {

// A value as JSON: the number, or "nan" / "inf" / "-inf".
nlohmann::json json_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

}  // namespace

void JsonlTracker::start(const std::string& project_name, const nlohmann::json&) {
  // Each line stands alone: lines the disk refused are written again once it has room.
  open_run(project_name, "metrics.jsonl", /*truncate=*/false, std::chrono::seconds(1), AsyncFile::AfterAnError::Retry);
  drop_torn_tail(path_, /*quoted_fields=*/false, "{");
}

void JsonlTracker::log(const std::shared_ptr<const Record>& record) {
  running_file().post([record](std::FILE*& file, const std::string& path) {
    nlohmann::json values = nlohmann::json::object();
    for (size_t i = 0; i < record->names.size(); ++i) values[record->names[i]] = json_number(record->values[i]);
    // Insertion order of the keys: step, wall_time, values, then texts where the call logged texts.
    std::string line = concat("{\"step\":", record->step, ",\"wall_time\":", nlohmann::json(record->wall_time).dump(),
                              ",\"values\":", values.dump());
    if (!record->text_names.empty()) {
      nlohmann::json texts = nlohmann::json::object();
      for (size_t i = 0; i < record->text_names.size(); ++i) texts[record->text_names[i]] = record->texts[i];
      line += ",\"texts\":" + texts.dump();
    }
    line += "}\n";
    write_all(file, path, line);
  });
}

}  // namespace acc::tracking

// JSON Lines: <logging_dir>/<project_name>/metrics.jsonl, one line per log call,
//   {"step": 12, "wall_time": 1700000000.25, "values": {"loss": 0.31, "lr": 0.001}}
// appended across runs (a resumed run continues the file), plus hparams.json. JSON has no NaN or
// infinities: those values are written as the strings "nan", "inf" and "-inf".
#pragma once

#include <memory>
#include <string>

#include "tracking/file_tracker.h"

namespace acc::tracking {

class JsonlTracker : public FileTracker {
 public:
  explicit JsonlTracker(std::string logging_dir) : FileTracker("jsonl", std::move(logging_dir)) {}
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
};

}  // namespace acc::tracking

// JSON Lines: <logging_dir>/<project_name>/metrics.jsonl, one line per log call,
//   {"step": 12, "wall_time": 1700000000.25, "values": {"loss": 0.31, "lr": 0.001}}
// appended across runs (a resumed run continues the file), plus hparams.json. JSON has no NaN or
// infinities: those values are written as the strings "nan", "inf" and "-inf".
#pragma once

#include <memory>
#include <string>

#include "tracking/async_file.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class JsonlTracker : public Tracker {
 public:
  explicit JsonlTracker(std::string logging_dir) : logging_dir_(std::move(logging_dir)) {}
  const std::string& name() const override { return name_; }
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  void finish() override;
  std::string path() const override { return path_; }

 private:
  const std::string name_ = "jsonl";
  std::string logging_dir_, path_;
  std::unique_ptr<AsyncFile> file_;
};

// A value as JSON: the number, or "nan" / "inf" / "-inf".
nlohmann::json json_number(double value);

}  // namespace acc::tracking

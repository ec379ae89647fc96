// CSV: <logging_dir>/<project_name>/metrics.csv, one row per log call:
//   step,wall_time,<name>,<name>,...
// The header holds every name seen so far, in order of first appearance; a cell is empty when its
// name was not logged in that call. A call with a new name widens the table: the writer thread
// rewrites the file with the longer header and empty cells for the new columns in the older rows
// (a temporary file renamed into place), so the file is always a rectangular CSV that pandas or
// any spreadsheet reads. A run on an existing metrics.csv continues it with the columns it has.
// Also writes hparams.json. Names are quoted as RFC 4180 says when they need it. A run holds
// metrics.csv.lock (an flock) while it writes: a second run on the same table at the same time, whose
// rewrites would cut rows out of the other's, is refused (Timeout) at its start.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/file_lock.h"
#include "tracking/file_tracker.h"

namespace acc::tracking {

class CsvTracker : public FileTracker {
 public:
  explicit CsvTracker(std::string logging_dir) : FileTracker("csv", std::move(logging_dir)) {}
  void start(const std::string& project_name, const nlohmann::json& config) override;
  void log(const std::shared_ptr<const Record>& record) override;
  void finish() override;  // and gives the table's lock back
  // "step" and "wall_time" are the file's own columns: a value of that name would be a second
  // column of the same name, which readers take for the first (csv.DictReader keeps the last).
  void check_name(const std::string& name) const override;

  struct Table;  // the columns; touched only by the writer thread once the file is open

 private:
  std::shared_ptr<Table> table_;
  std::unique_ptr<FileLock> lock_;  // the table's, while a run writes it
};

// The fields of the first CSV record in `text` and the bytes it takes (with its line end).
std::vector<std::string> parse_csv_record(const std::string& text, size_t* consumed);

}  // namespace acc::tracking

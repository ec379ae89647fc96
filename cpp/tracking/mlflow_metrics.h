// The metric files of a run in MLflow's file store (tracking/mlflow_store.h): one file per metric
// name under the run's metrics/ folder (a '/' in the name makes folders), a line per value.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace acc::tracking::mlflow {

// The line MLflow's file store appends for a metric: "<timestamp ms> <value> <step>\n".
std::string metric_line(int64_t timestamp_ms, double value, int64_t step);

// Appends metric lines to a run's files, for one thread (the tracker's writer). Lines are kept per
// file until flush() (the writer calls it every second and at the run's end) or until 64 KiB wait,
// then written with one write each (O_APPEND); each file is opened once, with the folders its name
// makes, and kept open (up to kMaxOpen at a time).
class MetricFiles {
 public:
  explicit MetricFiles(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  ~MetricFiles();  // closes the files; what flush() did not write is dropped
  MetricFiles(const MetricFiles&) = delete;
  MetricFiles& operator=(const MetricFiles&) = delete;
  // Io naming the file where it cannot be opened (or is not a regular file: a FIFO would block for
  // ever) or written; lines cut short by a full disk are taken back first (MLflow refuses a metric
  // file with a torn line).
  void append(const std::string& name, const std::string& line);
  void flush();

 private:
  static constexpr size_t kMaxOpen = 256;
  static constexpr size_t kWriteAt = size_t{64} << 10;
  struct File {
    int fd = -1;
    std::string waiting;
  };
  File& file_of(const std::string& name);
  void write_out(const std::string& name, File& file);
  std::string run_dir_;
  std::unordered_map<std::string, File> files_;
};

}  // namespace acc::tracking::mlflow

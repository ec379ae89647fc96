// The metric lines of a run in MLflow's file store (tracking/mlflow_store.h): one file per metric
// name under the run's metrics/ folder (a '/' in the name makes folders; tracking/appended_files.h
// writes them), a line per value.
#pragma once

#include <cstdint>
#include <string>

namespace acc::tracking::mlflow {

// The line MLflow's file store appends for a metric: "<timestamp ms> <value> <step>\n".
std::string metric_line(int64_t timestamp_ms, double value, int64_t step);

}  // namespace acc::tracking::mlflow

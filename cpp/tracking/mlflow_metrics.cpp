#include "tracking/mlflow_metrics.h"

#include "common/error.h"
#include "common/python_text.h"

namespace acc::tracking::mlflow {

std::string metric_line(int64_t timestamp_ms, double value, int64_t step) {
  return concat(timestamp_ms, " ", python_float_repr(value), " ", step, "\n");
}

}  // namespace acc::tracking::mlflow

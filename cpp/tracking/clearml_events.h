// The events of a ClearML offline session (metrics.jsonl) as ClearML's SDK writes them, and the names
// Accelerate's ClearMLTracker gives its values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace acc::tracking::clearml {

// Accelerate's ClearMLTracker._get_title_series: "eval_", "test_" or "train_" at the name's start is
// the series and the rest the title; any other name is the title of series "train".
std::pair<std::string, std::string> title_series(const std::string& name);

// ClearML's iteration of single values (Logger.report_single_value): -2^31.
constexpr int64_t kSingleValueIteration = -(int64_t{1} << 31);

// A scalar event (Logger.report_scalar; report_single_value with metric "Summary", the value's name
// as variant and kSingleValueIteration). `value` finite (ClearML reports NaN and infinities as 0.0).
nlohmann::ordered_json scalar_event(int64_t timestamp_ms, const std::string& task_id, int64_t iteration,
                                    const std::string& metric, const std::string& variant, double value);

// A debug image event (Logger.report_image): the file is <session>/data/<key>, `url` its path.
nlohmann::ordered_json image_event(int64_t timestamp_ms, const std::string& task_id, int64_t iteration,
                                   const std::string& metric, const std::string& variant, const std::string& key,
                                   const std::string& url);

// Refuses (InvalidArgument, naming `what`) a key ClearML would shorten (a part over 250 bytes: its MD5
// shortening is not built) or that would lead out of the session's data/ folder (a "." or ".." part).
void check_image_key(const std::string& key, const std::string& what);

// Where ClearML files a debug image under the session's data/ folder:
// <quoted project>/<quoted task name, cut to fit 128 with ".<id>">.<id>/metrics/<metric>/<variant>/
// <metric>_<variant>_<counter, 8 digits><extension>, '/' and URL-special characters in the metric,
// variant and file name replaced as ClearML replaces them (".slash.", "0x23", ...).
std::string image_key(const std::string& project, const std::string& task_name, const std::string& task_id,
                      const std::string& metric, const std::string& variant, int64_t counter,
                      const std::string& extension);

}  // namespace acc::tracking::clearml

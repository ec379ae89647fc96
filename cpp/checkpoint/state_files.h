// Reading the small files of a save_state checkpoint: raw bytes and JSON whose every error names
// the file, and typed, range-checked JSON fields.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace acc {

std::string join_path(const std::string& dir, const std::string& name);

std::string read_file(const std::string& path);
nlohmann::json read_json(const std::string& path);

// Runs an object's own state checks; a failure names the checkpoint file the state came from.
template <typename Check>
void checked_by_file(const std::string& path, Check check) {
  try {
    check();
  } catch (const Error& e) {
    fail(e.status(), "checkpoint file '", path, "': ", e.what());
  }
}

// A field of a checkpoint's JSON file, of exactly its type: an integer field takes no 1.5, no -1
// (unsigned) and nothing past its type's range; a number is finite. An Io error naming the file and
// the key when it is missing or does not fit.
template <class T>
T json_field(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) fail(Status::Io, "checkpoint file '", path, "' lacks '", key, "'");
  const nlohmann::json& v = j[key];
  auto refuse = [&](const char* expected) {
    fail(Status::Io, "checkpoint file '", path, "': '", key, "' must be ", expected, ", not ", v.dump());
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) refuse("true or false");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) refuse("an integer");
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) refuse("a smaller integer");
    } else {
      const auto n = v.get<int64_t>();
      if (n < 0 && std::is_unsigned_v<T>) refuse("an integer >= 0");
      if (n < static_cast<int64_t>(std::numeric_limits<T>::min())) refuse("a larger integer");
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) refuse("a finite number");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) refuse("a string");
  } else {
    static_assert(std::is_same_v<T, std::vector<double>>, "a field type json_field does not check");
    if (!v.is_array()) refuse("a list of numbers");
    for (const auto& item : v)
      if (!item.is_number() || !std::isfinite(item.get<double>())) refuse("a list of finite numbers");
  }
  return v.get<T>();
}

// An integer field that must be at least `min` (a step, a count, a position).
template <class T>
T json_field_at_least(const nlohmann::json& j, const char* key, const std::string& path, T min) {
  const T value = json_field<T>(j, key, path);
  if (value < min) fail(Status::Io, "checkpoint file '", path, "': '", key, "' must be >= ", min, ", not ", value);
  return value;
}

}  // namespace acc

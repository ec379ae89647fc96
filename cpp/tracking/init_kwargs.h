// Accelerate's init_kwargs for one tracker ({"mlflow": {"run_name": "..."}} gives the mlflow tracker
// {"run_name": "..."}): the keyword arguments its class takes beyond the project name. Each tracker
// takes its keys by type; a key that none took is an error, as Python's TypeError for an unexpected
// keyword argument, so that a misspelt setting is never silently dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace acc::tracking {

class InitKwargs {
 public:
  // InvalidArgument unless `kwargs` is an object (null stands for none). `what` names them in errors:
  // Accelerate's init_kwargs, or log_kwargs (the keyword arguments of one log call).
  InitKwargs(std::string tracker, const nlohmann::json& kwargs, std::string what = "init_kwargs");
  // The key's value, if given, of its type (InvalidArgument otherwise; null counts as not given).
  std::optional<std::string> text(const char* key);
  std::optional<int64_t> integer(const char* key, int64_t min, int64_t max);
  std::optional<bool> boolean(const char* key);
  std::optional<double> number(const char* key, double min, double max);
  std::optional<nlohmann::json> value(const char* key);
  // Whether the key is there, null included (where null means something else than leaving it out).
  bool given(const char* key);
  // Unsupported, naming the key and `why`, when it was given.
  void refuse(const char* key, const char* why);
  // InvalidArgument naming the first key no call above took.
  void refuse_the_rest() const;

 private:
  const nlohmann::json* find(const char* key);
  std::string tracker_;
  nlohmann::json kwargs_;
  std::string what_;
  std::set<std::string> taken_;
};

}  // namespace acc::tracking

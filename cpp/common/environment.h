// The process's environment as the library reads it.
#pragma once

#include <cstdlib>

namespace acc {

// The variable's value, or nullptr where it is unset or empty (an empty value means "not set" to
// every variable the library reads: MLFLOW_*, DVC_*, ...).
inline const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

}  // namespace acc

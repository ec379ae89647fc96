// The process's environment as the library reads it.
#pragma once

#include <cstdlib>
#include <string>

namespace acc {

// The variable's value, or nullptr where it is unset or empty (an empty value means "not set" to
// every variable the library reads: MLFLOW_*, DVC_*, ...).
inline const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

// huggingface_hub's HF_HOME, where Accelerate keeps its config and trackio its projects: $HF_HOME,
// else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface, with a leading "~" expanded to the
// home folder ($HOME, else the user's entry; "" where neither is known), as Python's expanduser.
std::string huggingface_home();

// Python's os.path.expanduser: a leading "~" (the home folder, as huggingface_home finds it) or
// "~user" (that user's, where the system knows them) expanded; any other path as it is.
std::string expand_user(const std::string& path);

// Python's os.path.expandvars: "$NAME" and "${NAME}" replaced by the variables' values, those of
// unset variables (and any other '$') left as they are.
std::string expand_variables(const std::string& text);

// The machine's name (gethostname), "localhost" where it has none: what trackers record a run's host as.
std::string host_name();

}  // namespace acc

#include "common/environment.h"

#include <pwd.h>
#include <unistd.h>

namespace acc {
namespace {

std::string home_dir() {
  if (const char* home = nonempty_env("HOME")) return home;
  if (const passwd* entry = ::getpwuid(::getuid()); entry && entry->pw_dir) return entry->pw_dir;
  return "";
}

}  // namespace

std::string huggingface_home() {
  std::string path;
  if (const char* hf_home = nonempty_env("HF_HOME")) {
    path = hf_home;
  } else {
    const char* cache = nonempty_env("XDG_CACHE_HOME");
    path = std::string(cache ? cache : "~/.cache") + "/huggingface";
  }
  return expand_user(path);
}

std::string expand_user(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  const size_t slash = path.find('/');
  const std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string home;
  if (user.empty()) {
    home = home_dir();
  } else if (const passwd* entry = ::getpwnam(user.c_str()); entry && entry->pw_dir) {
    home = entry->pw_dir;
  } else {
    return path;  // an unknown user: as Python leaves it
  }
  return home + (slash == std::string::npos ? "" : path.substr(slash));
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

}  // namespace acc

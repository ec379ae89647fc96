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
  if (path == "~" || path.rfind("~/", 0) == 0) path = home_dir() + path.substr(1);
  return path;
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

}  // namespace acc

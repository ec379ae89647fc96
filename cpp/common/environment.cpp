#include "common/environment.h"

#include <pwd.h>

#include <unistd.h>
#include <cctype>
#include <cstdlib>

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

std::string expand_variables(const std::string& text) {
  std::string out;
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '$' && i + 1 < text.size()) {
      const bool braced = text[i + 1] == '{';
      const size_t start = i + (braced ? 2 : 1);
      size_t end = start;
      if (braced) {
        end = text.find('}', start);
      } else {
        while (end < text.size() && name_char(text[end])) ++end;
      }
      if (end != std::string::npos && end > start) {
        const std::string name = text.substr(start, end - start);
        if (const char* value = std::getenv(name.c_str())) {
          out += value;
          i = end + (braced ? 1 : 0);
          continue;
        }
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

}  // namespace acc

#include "common/name_patterns.h"

#include <fnmatch.h>

#include <sstream>

#include "common/error.h"

namespace acc {

NamePatterns::NamePatterns(const std::string& patterns) : text_(patterns) {
  std::stringstream in(patterns);
  for (std::string glob; std::getline(in, glob, ',');) {
    const auto first = glob.find_first_not_of(' '), last = glob.find_last_not_of(' ');
    require(first != std::string::npos, "name pattern list '", patterns, "' has an empty pattern");
    globs_.push_back(glob.substr(first, last - first + 1));
  }
  require(!globs_.empty(), "the name pattern list is empty");
}

bool NamePatterns::matches(const std::string& name) const {
  for (const auto& glob : globs_)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace acc

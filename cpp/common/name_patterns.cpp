#include "common/name_patterns.h"

#include <fnmatch.h>

#include "common/error.h"
#include "common/text.h"

namespace acc {

NamePatterns::NamePatterns(const std::string& patterns) : text_(patterns) {
  for (const auto& glob : split_trimmed(patterns, ',')) {
    require(!glob.empty(), "name pattern list '", patterns, "' has an empty pattern");
    globs_.push_back(glob);
  }
  require(!globs_.empty(), "the name pattern list is empty");
}

bool NamePatterns::matches(const std::string& name) const {
  for (const auto& glob : globs_)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace acc

// Parameter names chosen by patterns: a comma-separated list of shell globs ("*.bias,*norm*"), each
// matched against the whole name ('*' crosses dots: "encoder.*" takes every encoder parameter).
#pragma once

#include <string>
#include <vector>

namespace acc {

class NamePatterns {
 public:
  // InvalidArgument for an empty list or an empty pattern in it.
  explicit NamePatterns(const std::string& patterns);
  bool matches(const std::string& name) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<std::string> globs_;
};

}  // namespace acc

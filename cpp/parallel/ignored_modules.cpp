#include "parallel/ignored_modules.h"

#include <regex>

#include "common/error.h"

namespace acc {
namespace {

std::regex compile(const std::string& pattern, const std::string& name) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail(Status::InvalidArgument, name, " '", pattern, "' is not a regular expression: ", e.what());
  }
}

}  // namespace

void check_module_pattern(const std::string& pattern, const std::string& name) { (void)compile(pattern, name); }

std::set<std::string> ignored_parameter_names(const std::vector<std::string>& parameter_names,
                                              const std::string& pattern) {
  std::set<std::string> ignored;
  if (pattern.empty()) return ignored;
  const std::regex re = compile(pattern, "ignored_modules");
  try {
    const bool root = std::regex_match(std::string(), re);
    for (const auto& name : parameter_names) {
      // The modules holding `name`: the root, then each prefix ending before a dot.
      bool matched = root;
      for (size_t dot = name.find('.'); !matched && dot != std::string::npos; dot = name.find('.', dot + 1))
        matched = std::regex_match(name.substr(0, dot), re);
      if (matched) ignored.insert(name);
    }
  } catch (const std::regex_error& e) {  // std::regex gives up on some patterns while matching
    fail(Status::InvalidArgument, "ignored_modules '", pattern, "' cannot be matched: ", e.what());
  }
  if (ignored.empty()) {
    const std::string example = parameter_names.empty() ? "" : parameter_names.front();
    const size_t dot = example.rfind('.');
    fail(Status::InvalidArgument, "ignored_modules '", pattern, "' matches no module that holds parameters (it is ",
         "matched against whole module names: parameter '", example, "' lies in module '",
         dot == std::string::npos ? "" : example.substr(0, dot), "')");
  }
  return ignored;
}

}  // namespace acc

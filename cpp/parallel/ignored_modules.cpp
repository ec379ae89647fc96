#include "parallel/ignored_modules.h"

#include "common/error.h"
#include "common/module_regex.h"

namespace acc {

void check_module_pattern(const std::string& pattern, const std::string& name) { (void)module_regex(pattern, name); }

std::set<std::string> ignored_parameter_names(const std::vector<std::string>& parameter_names,
                                              const std::string& pattern) {
  std::set<std::string> ignored;
  if (pattern.empty()) return ignored;
  const auto matches = module_regex(pattern, "ignored_modules");
  const bool root = matches("");
  for (const auto& name : parameter_names) {
    // The modules holding `name`: the root, then each prefix ending before a dot.
    bool matched = root;
    for (size_t dot = name.find('.'); !matched && dot != std::string::npos; dot = name.find('.', dot + 1))
      matched = matches(name.substr(0, dot));
    if (matched) ignored.insert(name);
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

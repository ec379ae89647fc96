#include "parallel/ignored_modules.h"

#include "common/error.h"
#include "common/module_regex.h"
#include "common/text.h"

namespace acc {

void check_module_pattern(const std::string& pattern, const std::string& name) { (void)module_regex(pattern, name); }

std::set<std::string> ignored_parameter_names(const std::vector<std::string>& parameter_names,
                                              const std::string& pattern) {
  std::set<std::string> ignored;
  if (pattern.empty()) return ignored;
  const auto matches = module_regex(pattern, "ignored_modules");
  const bool root = matches("");
  for (const auto& name : parameter_names) {
    bool matched = root;
    for (const auto& module : enclosing_modules(name)) matched = matched || matches(module);
    if (matched) ignored.insert(name);
  }
  if (ignored.empty()) {
    const std::string example = parameter_names.empty() ? "" : parameter_names.front();
    const auto modules = enclosing_modules(example);
    fail(Status::InvalidArgument, "ignored_modules '", pattern, "' matches no module that holds parameters (it is ",
         "matched against whole module names: parameter '", example, "' lies in module '",
         modules.empty() ? "" : modules.back(), "')");
  }
  return ignored;
}

}  // namespace acc

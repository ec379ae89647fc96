// FSDP's ignored_modules as Accelerate takes it from a string (fsdp_config's fsdp_ignored_modules,
// FSDP_IGNORED_MODULES): a regular expression matched against the whole name of every module
// (Python's re.fullmatch over named_modules(), the root's name being ""). The parameters of a
// matched module and of its submodules are left out of sharding: every process keeps them whole.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace acc {

// InvalidArgument naming the pattern unless it is a regular expression this library runs
// (common/module_regex.h: ECMAScript's syntax, which Python's re shares for names).
// `name` says where the pattern comes from.
void check_module_pattern(const std::string& pattern, const std::string& name = "ignored_modules");

// Of `parameter_names`, those inside a module whose name `pattern` matches whole (a module's name
// is a prefix of its parameters' names up to a dot). Empty for an empty pattern; InvalidArgument
// when a pattern matches no module holding parameters, which would shard everything unnoticed.
std::set<std::string> ignored_parameter_names(const std::vector<std::string>& parameter_names,
                                              const std::string& pattern);

}  // namespace acc

// Regular expressions over module names (PEFT's target_modules and exclude_modules in their string
// form, FSDP's ignored_modules), matched whole as Python's re.fullmatch. std::regex matches by
// recursion with backtracking, so a pattern that could overflow the stack or take exponential time
// on a name is refused before it runs (module names are short and such patterns simple).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace acc {

// A whole-name matcher for `expression`; InvalidArgument naming `key` (the setting it came from)
// when the expression is invalid or past the cost bounds.
std::function<bool(const std::string&)> module_regex(const std::string& expression, const std::string& key);
// Where `expression` matches a whole name, the text its first group captured (Python's
// re.fullmatch(...).group(1)); nothing where it does not match.
std::function<std::optional<std::string>(const std::string&)> module_regex_group(const std::string& expression,
                                                                                 const std::string& key);

}  // namespace acc

// Small string helpers the option and name parsers share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace acc {

// `text` without the spaces and tabs around it.
std::string trimmed(const std::string& text);
bool ends_with(const std::string& text, const std::string& tail);
// The modules a parameter or buffer name lies in, outermost first, the root ("") left out:
// "a.b.weight" -> {"a", "a.b"}; the last is the module that holds it.
std::vector<std::string> enclosing_modules(const std::string& name);
// The innermost of them: `name` up to its last dot ("" for a name without one).
std::string enclosing_module(const std::string& name);
// `text` with ASCII letters in lower case (names and keywords compared without case).
std::string lowercase(std::string text);
std::string uppercase(std::string text);
// The pieces of a `separator`-separated list, each trimmed; empty ones are kept, a leading or
// trailing separator's included, for the caller to refuse ("" is one empty piece).
std::vector<std::string> split_trimmed(const std::string& text, char separator);
// `text` as a decimal integer (an optional '-', digits, nothing else); nothing where it is not one
// or is past int64's range.
std::optional<int64_t> parse_integer(const std::string& text);

}  // namespace acc

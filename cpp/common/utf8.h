// Names that end up in JSON, protobuf strings or file headers must be UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace acc {

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_utf8(std::string_view text);

// `text` with every byte that is not part of well-formed UTF-8 written as "\xNN" (error messages
// quote what they were given, and callers, the bindings' strings among them, read them as UTF-8).
std::string printable_utf8(std::string_view text);

}  // namespace acc

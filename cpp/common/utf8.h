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

// `text` with each lone byte 0x85 or 0xA0 (one that is not part of well-formed UTF-8) as the
// character it stands for in Latin-1, U+0085 / U+00A0, encoded in UTF-8: yaml-cpp decodes YAML's
// "\N" and "\_" escapes (which PyYAML writes for those characters) to such single bytes.
std::string latin1_escapes_as_utf8(std::string_view text);

}  // namespace acc

// Names that end up in JSON, protobuf strings or file headers must be UTF-8.
#pragma once

#include <string_view>

namespace acc {

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_utf8(std::string_view text);

}  // namespace acc

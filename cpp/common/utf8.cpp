#include "common/utf8.h"

#include <cstdint>
#include <cstdio>

namespace acc {
namespace {

// The length of the well-formed UTF-8 sequence at text[i], or 0 when there is none.
size_t sequence_length(std::string_view text, size_t i) {
  const auto lead = static_cast<uint8_t>(text[i]);
  size_t length = 0;
  uint32_t code = 0, min = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() - i < length) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<uint8_t>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = code << 6 | (next & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// `text` with its well-formed sequences kept and each byte outside them rewritten by `write`.
template <class Write>
std::string with_invalid_bytes_as(std::string_view text, Write write) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = sequence_length(text, i);
    if (length > 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      write(static_cast<uint8_t>(text[i++]), out);
    }
  }
  return out;
}

}  // namespace

bool is_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = sequence_length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string printable_utf8(std::string_view text) {
  return with_invalid_bytes_as(text, [](uint8_t byte, std::string& out) {
    char escaped[5];
    std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned>(byte));
    out += escaped;
  });
}

std::string latin1_escapes_as_utf8(std::string_view text) {
  return with_invalid_bytes_as(text, [](uint8_t byte, std::string& out) {
    if (byte == 0x85 || byte == 0xA0) out += '\xC2';
    out += static_cast<char>(byte);
  });
}

}  // namespace acc

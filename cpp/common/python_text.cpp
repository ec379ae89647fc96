#include "common/python_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace acc {
namespace {

// repr(str): single quotes unless the text holds one and no double quote; backslashes, the quote,
// \t \n \r and other control characters escaped. (Characters past ASCII are kept: the texts here are
// UTF-8, and Python prints printable ones as they are; the C1 controls, U+0080 to U+009F, U+00A0 and
// U+00AD, which it does not count as printable, are escaped as it escapes them.)
std::string python_repr(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char hex[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else if (c == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if ((next >= 0x80 && next <= 0xa0) || next == 0xad) {
        std::snprintf(hex, sizeof hex, "\\x%02x", next);
        out += hex;
        ++i;
      } else {
        out += static_cast<char>(c);
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string python_repr(const nlohmann::json& value) {
  return value.is_string() ? python_repr(value.get<std::string>()) : python_str(value);
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout of them (float_repr_style 'short').
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string scientific(buffer, result.ptr);  // e.g. "-1.25e-05"
  const size_t e = scientific.find('e');
  const int exponent = std::atoi(scientific.c_str() + e + 1);
  std::string mantissa = scientific.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits = mantissa.substr(0, 1) + (mantissa.size() > 2 ? mantissa.substr(2) : "");
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char tail[16];
    std::snprintf(tail, sizeof tail, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += tail;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t point = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= point) digits += std::string(point - digits.size(), '0');
    out = digits.substr(0, point) + "." + (digits.size() > point ? digits.substr(point) : "0");
  }
  return negative ? "-" + out : out;
}

std::string python_str(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return value.get<std::string>();
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case nlohmann::json::value_t::null:
      return "None";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return value.dump();
    case nlohmann::json::value_t::number_float:
      return python_float_repr(value.get<double>());
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + python_repr(value[i]);
      return out + "]";
    }
    case nlohmann::json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out += (first ? "" : ", ") + python_repr(key) + ": " + python_repr(item);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

}  // namespace acc

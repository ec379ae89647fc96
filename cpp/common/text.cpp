#include "common/text.h"

#include <cctype>
#include <charconv>
#include <sstream>

namespace acc {

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> enclosing_modules(const std::string& name) {
  std::vector<std::string> out;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    out.push_back(name.substr(0, dot));
  return out;
}

std::string enclosing_module(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

std::string lowercase(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string uppercase(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::vector<std::string> split_trimmed(const std::string& text, char separator) {
  // Every piece, a last empty one included ("a," is "a" and ""), which getline would drop.
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string::npos; start = end + 1)
    pieces.push_back(trimmed(text.substr(start, end - start)));
  pieces.push_back(trimmed(text.substr(start)));
  return pieces;
}

std::optional<int64_t> parse_integer(const std::string& text) {
  int64_t value = 0;
  const char *first = text.data(), *last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (text.empty() || error != std::errc() || end != last) return std::nullopt;
  return value;
}

}  // namespace acc

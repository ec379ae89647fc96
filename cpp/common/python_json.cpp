#include "common/python_json.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "common/json_input.h"

namespace acc {
namespace {

void dump_into(const nlohmann::ordered_json& value, int indent, int depth, std::string& out) {
  const bool object = value.is_object();
  if ((!object && !value.is_array()) || value.empty()) {
    if (value.is_number_float() && !std::isfinite(value.get<double>())) {
      const double v = value.get<double>();
      out += std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
    } else {
      out += value.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
    }
    return;
  }
  const std::string inner(static_cast<size_t>(indent * (depth + 1)), ' ');
  out += object ? "{\n" : "[\n";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    out += first ? "" : ",\n";
    first = false;
    out += inner;
    if (object) out += nlohmann::ordered_json(it.key()).dump(-1, ' ', true) + ": ";
    dump_into(*it, indent, depth + 1, out);
  }
  out += "\n" + std::string(static_cast<size_t>(indent * depth), ' ') + (object ? "}" : "]");
}

// Strings in `node` that are one of `words`' placeholders become their doubles.
void restore(nlohmann::ordered_json& node, const std::map<std::string, double>& words) {
  if (node.is_string()) {
    const auto it = words.find(node.get<std::string>());
    if (it != words.end()) node = it->second;
    return;
  }
  if (node.is_structured())
    for (auto& child : node) restore(child, words);
}

}  // namespace

std::string python_json_dump(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump_into(value, indent, 0, out);
  return out;
}

nlohmann::ordered_json parse_python_json(std::string_view text, const std::string& what) {
  // Each bare word becomes a string no part of the text holds, read back as its double after.
  std::string tag = "acc-python-json-";
  while (text.find(tag) != std::string_view::npos) tag += "-";
  const std::map<std::string, double> words = {{tag + "NaN", std::numeric_limits<double>::quiet_NaN()},
                                               {tag + "Infinity", std::numeric_limits<double>::infinity()},
                                               {tag + "-Infinity", -std::numeric_limits<double>::infinity()}};
  std::string strict;
  strict.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      strict += c;
      if (c == '\\' && i + 1 < text.size())
        strict += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.substr(i, std::char_traits<char>::length(word)) != word) continue;
      strict += "\"" + tag + word + "\"";
      i += std::char_traits<char>::length(word) - 1;
      replaced = true;
      break;
    }
    if (!replaced) strict += c;
  }
  nlohmann::ordered_json value = parse_ordered_json_input(strict, what);
  restore(value, words);
  return value;
}

}  // namespace acc

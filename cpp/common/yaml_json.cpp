#include "common/yaml_json.h"

#include <cstdlib>

#include "common/error.h"
#include "common/python_text.h"

namespace acc {
namespace {

nlohmann::json convert(const YAML::Node& n, const std::string& origin, int64_t& left, int depth) {
  if (--left < 0) fail(Status::InvalidArgument, origin, ": the YAML expands to too many values (aliases of aliases?)");
  if (depth < 0) fail(Status::InvalidArgument, origin, ": the YAML is nested too deep");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;
      if (s == "true" || s == "false") return s == "true";
      if (s == "null" || s == "~") return nullptr;
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') return i;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return d;
      return s;
    }
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      for (const auto& item : n) a.push_back(convert(item, origin, left, depth - 1));
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) fail(Status::InvalidArgument, origin, ": a key that is not a name");
        o[kv.first.Scalar()] = convert(kv.second, origin, left, depth - 1);
      }
      return o;
    }
  }
  return nullptr;
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& node, const std::string& origin, int64_t max_values, int max_depth) {
  return convert(node, origin, max_values, max_depth);
}

void emit_json_as_yaml(YAML::Emitter& out, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::Block << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        emit_json_as_yaml(out, item);
      }
      out << YAML::EndMap;
      return;
    case nlohmann::json::value_t::array:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::Block << YAML::BeginSeq;
      for (const auto& item : value) emit_json_as_yaml(out, item);
      out << YAML::EndSeq;
      return;
    case nlohmann::json::value_t::string:
      out << YAML::DoubleQuoted << value.get<std::string>();
      return;
    case nlohmann::json::value_t::boolean:
      out << (value.get<bool>() ? "true" : "false");
      return;
    case nlohmann::json::value_t::number_float: {
      // As PyYAML writes a float: its repr, with ".0" where an exponent has no point ("1.0e-05"), which
      // YAML 1.1 readers would otherwise take for text.
      std::string text = python_float_repr(value.get<double>());
      if (text.find('.') == std::string::npos && text.find('e') != std::string::npos) text.insert(text.find('e'), ".0");
      out << text;
      return;
    }
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      return;
    default:
      out << value.dump();
      return;  // integers
  }
}

}  // namespace acc

// YAML documents as JSON values and back, for the files that other tools read as YAML and this
// library keeps as JSON (a config file saved as .json, DVCLive's params.yaml).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace acc {

// The JSON value of `node`, scalars typed as PyYAML's safe loader types the plain ones (integers,
// floats, true/false; null), quoted scalars kept as text. Aliases make a YAML tree a graph whose
// expansion can grow exponentially with its text: InvalidArgument, naming `origin`, past `max_values`
// values or `max_depth` levels, as the walk expands it.
nlohmann::json yaml_to_json(const YAML::Node& node, const std::string& origin, int64_t max_values = 100000,
                            int max_depth = 64);

// Emits `value` as YAML: objects as block mappings, arrays as block sequences, texts double-quoted
// (so that none reads back as a number or a boolean), floats as PyYAML writes them.
void emit_json_as_yaml(YAML::Emitter& out, const nlohmann::json& value);

}  // namespace acc

// The hyper-parameter configuration handed to init_trackers: parsed from JSON and flattened for
// trackers that only show scalar values.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace acc::tracking {

// Parses a configuration: a JSON object ("" stands for {}); anything else is InvalidArgument.
nlohmann::json parse_config(const std::string& text);

// Flattens nested objects into "outer/inner" names; leaves are numbers, strings, booleans or nulls,
// and arrays become their JSON text (TensorBoard's HParams only shows scalar values).
nlohmann::json flatten_config(const nlohmann::json& config);

// Writes the configuration as <dir>/hparams.json (through a temporary file, so readers never see
// half a file).
void write_config_file(const std::string& dir, const nlohmann::json& config);

}  // namespace acc::tracking

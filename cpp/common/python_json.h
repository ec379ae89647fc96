// JSON as Python's json module writes and reads it by default (allow_nan): NaN, Infinity and
// -Infinity stand as bare words, which strict JSON (and nlohmann's reader and writer) lacks. The
// files Python tools write this way (DVCLive's metrics.json) are read and written so here.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace acc {

// json.dump(value, indent=indent) (ensure_ascii): objects and arrays one item a line, a non-finite
// number as NaN, Infinity or -Infinity.
std::string python_json_dump(const nlohmann::ordered_json& value, int indent);

// json.loads of `text`: NaN, Infinity and -Infinity outside strings read as those doubles; anything
// else as parse_ordered_json_input reads it (its bounds; an error names `what`).
nlohmann::ordered_json parse_python_json(std::string_view text, const std::string& what);

}  // namespace acc

// JSON that comes from outside the library (model specs, tracker configurations, checkpoint and
// safetensors files) is parsed here, with a bound on its nesting: a document nested 100,000 deep
// would otherwise overflow the stack of whatever walks the tree afterwards.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "common/error.h"

namespace acc {

constexpr int kMaxJsonDepth = 256;

// nlohmann's message without its "[json.exception.parse_error.101] " tag, which says nothing to a
// user (for parsers of our own over its SAX interface).
std::string_view plain_message(const nlohmann::json::exception& e);

// The parsed document. Invalid JSON or nesting deeper than kMaxJsonDepth is an error with
// `status`, the message starting with `what` (e.g. "model spec", "checkpoint file 'x'").
nlohmann::json parse_json_input(std::string_view text, const std::string& what,
                                Status status = Status::InvalidArgument);
// The same, with each object's keys in the document's order (where order means something: PEFT's
// rank_pattern takes the first key that matches).
nlohmann::ordered_json parse_ordered_json_input(std::string_view text, const std::string& what,
                                                Status status = Status::InvalidArgument);

}  // namespace acc

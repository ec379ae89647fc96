#include "common/json_input.h"

namespace acc {

nlohmann::json parse_json_input(std::string_view text, const std::string& what, Status status) {
  // The parser itself keeps its stack on the heap; the callback stops it at the first value that is
  // nested too deeply (returning false would only drop the value).
  const nlohmann::json::parser_callback_t bound = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) fail(status, what, " is nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), bound);
  } catch (const nlohmann::json::exception& e) {
    fail(status, what, " is not valid JSON: ", e.what());
  }
}

}  // namespace acc

#include "common/json_input.h"

namespace acc {
namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " tag, which says nothing to a user.
std::string_view plain_message(const nlohmann::json::exception& e) {
  std::string_view message = e.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    const size_t end = message.find("] ");
    if (end != std::string_view::npos) message.remove_prefix(end + 2);
  }
  return message;
}

// A SAX pass that only measures nesting. The DOM parser's callback form could bound it as well,
// but it scans the parent's elements each time an object ends, which is quadratic in an array of
// objects (a spec of 20,000 layers took seconds); this pass and the plain DOM parse are linear.
struct NestingBound : nlohmann::json::json_sax_t {
  std::string_view what;
  Status status;
  int depth = 0;

  NestingBound(std::string_view what, Status status) : what(what), status(status) {}
  bool deeper() {
    if (++depth > kMaxJsonDepth) fail(status, what, " is nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return deeper(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return deeper(); }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    fail(status, what, " is not valid JSON: ", plain_message(e));
  }
};

template <typename Json>
Json parse_bounded(std::string_view text, const std::string& what, Status status) {
  NestingBound bound(what, status);
  nlohmann::json::sax_parse(text.begin(), text.end(), &bound);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail(status, what, " is not valid JSON: ", plain_message(e));
  }
}

}  // namespace

nlohmann::json parse_json_input(std::string_view text, const std::string& what, Status status) {
  return parse_bounded<nlohmann::json>(text, what, status);
}

nlohmann::ordered_json parse_ordered_json_input(std::string_view text, const std::string& what, Status status) {
  return parse_bounded<nlohmann::ordered_json>(text, what, status);
}

}  // namespace acc

#include "common/json_input.h"

#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace acc {

std::string_view plain_message(const nlohmann::json::exception& e) {
  std::string_view message = e.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    const size_t end = message.find("] ");
    if (end != std::string_view::npos) message.remove_prefix(end + 2);
  }
  return message;
}

namespace {

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

// Builds an ordered_json linearly. nlohmann's own parser inserts each key through ordered_map's
// linear search for a duplicate, quadratic in an object's keys (200,000 keys took a minute); here
// each open object keeps an index of its keys. A repeated key keeps its first place and takes the
// last value, as nlohmann's parser (and Python's json) does.
struct OrderedBuilder : nlohmann::ordered_json::json_sax_t {
  using Json = nlohmann::ordered_json;
  using Entries = std::vector<std::pair<const std::string, Json>>;  // ordered_map's storage
  struct Open {
    Json* value;
    std::unordered_map<std::string, size_t> index;  // an object's keys and their places
    std::string key;                                // the key whose value comes next
  };
  Json root;
  std::vector<Open> open;

  Json* place(Json value) {
    if (open.empty()) return &(root = std::move(value));
    Open& top = open.back();
    if (top.value->is_array()) {
      auto& array = top.value->get_ref<Json::array_t&>();
      array.push_back(std::move(value));
      return &array.back();
    }
    auto& entries = static_cast<Entries&>(top.value->get_ref<Json::object_t&>());
    const auto [at, fresh] = top.index.emplace(top.key, entries.size());
    if (!fresh) return &(entries[at->second].second = std::move(value));
    entries.emplace_back(std::move(top.key), std::move(value));
    return &entries.back().second;
  }
  bool null() override { return place(nullptr), true; }
  bool boolean(bool v) override { return place(v), true; }
  bool number_integer(number_integer_t v) override { return place(v), true; }
  bool number_unsigned(number_unsigned_t v) override { return place(v), true; }
  bool number_float(number_float_t v, const string_t&) override { return place(v), true; }
  bool string(string_t& v) override { return place(std::move(v)), true; }
  bool binary(binary_t& v) override { return place(Json::binary(std::move(v))), true; }
  bool start_object(std::size_t) override { return open.push_back({place(Json::object()), {}, {}}), true; }
  bool key(string_t& k) override { return open.back().key = std::move(k), true; }
  bool end_object() override { return open.pop_back(), true; }
  bool start_array(std::size_t) override { return open.push_back({place(Json::array()), {}, {}}), true; }
  bool end_array() override { return open.pop_back(), true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }
};

// JSON text has no NUL byte (one inside a string is written \u0000); nlohmann's lexer would take
// one as the end of the input and accept whatever follows it.
void refuse_nul(std::string_view text, const std::string& what, Status status) {
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos) fail(status, what, " is not valid JSON: a NUL byte at offset ", nul);
}

template <typename Json>
Json parse_bounded(std::string_view text, const std::string& what, Status status) {
  refuse_nul(text, what, status);
  NestingBound bound(what, status);
  nlohmann::json::sax_parse(text.begin(), text.end(), &bound);
  try {
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      OrderedBuilder builder;
      if (!nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder))  // the bound pass saw it whole
        fail(status, what, " is not valid JSON");
      return std::move(builder.root);
    } else {
      return Json::parse(text.begin(), text.end());
    }
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

#include "tracking/init_kwargs.h"

#include "common/error.h"
#include "common/utf8.h"

namespace acc::tracking {

InitKwargs::InitKwargs(std::string tracker, const nlohmann::json& kwargs, std::string what)
    : tracker_(std::move(tracker)),
      kwargs_(kwargs.is_null() ? nlohmann::json::object() : kwargs),
      what_(std::move(what)) {
  require(kwargs_.is_object(), what_, "[\"", tracker_, "\"] is a JSON object of keyword arguments, not ",
          kwargs_.type_name());
}

const nlohmann::json* InitKwargs::find(const char* key) {
  taken_.insert(key);
  const auto found = kwargs_.find(key);
  return found == kwargs_.end() || found->is_null() ? nullptr : &*found;
}

std::optional<std::string> InitKwargs::text(const char* key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  require(v->is_string(), what_, "[\"", tracker_, "\"][\"", key, "\"] is a string, not ", v->type_name());
  return v->get<std::string>();
}

std::optional<int64_t> InitKwargs::integer(const char* key, int64_t min, int64_t max) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  require(v->is_number_integer(), what_, "[\"", tracker_, "\"][\"", key, "\"] is an integer, not ", v->type_name());
  const auto n = v->get<int64_t>();
  require(n >= min && n <= max && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)), what_, "[\"",
          tracker_, "\"][\"", key, "\"] is ", v->dump(), "; it must be from ", min, " to ", max);
  return n;
}

std::optional<bool> InitKwargs::boolean(const char* key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  require(v->is_boolean(), what_, "[\"", tracker_, "\"][\"", key, "\"] is true or false, not ", v->type_name());
  return v->get<bool>();
}

std::optional<double> InitKwargs::number(const char* key, double min, double max) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  require(v->is_number(), what_, "[\"", tracker_, "\"][\"", key, "\"] is a number, not ", v->type_name());
  const double n = v->get<double>();
  require(n >= min && n <= max, what_, "[\"", tracker_, "\"][\"", key, "\"] is ", v->dump(), "; it must be from ", min,
          " to ", max);
  return n;
}

std::optional<nlohmann::json> InitKwargs::value(const char* key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  return *v;
}

bool InitKwargs::given(const char* key) {
  taken_.insert(key);
  return kwargs_.contains(key);
}

void InitKwargs::refuse(const char* key, const char* why) {
  if (find(key)) fail(Status::Unsupported, what_, "[\"", tracker_, "\"][\"", key, "\"] is not supported: ", why);
}

void InitKwargs::refuse_the_rest() const {
  for (const auto& item : kwargs_.items())
    if (!taken_.count(item.key()))
      fail(Status::InvalidArgument, what_, "[\"", tracker_, "\"]: the ", tracker_,
           " tracker takes no keyword argument \"", printable_utf8(item.key()), "\"",
           taken_.empty() ? std::string(" (it takes none)") : "");
}

}  // namespace acc::tracking

#include "common/options.h"

#include <algorithm>

#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "common/text.h"

namespace acc {
namespace {

const char* type_name(OptionType type) {
  switch (type) {
    case OptionType::Int: return "an integer";
    case OptionType::Double: return "a number";
    case OptionType::Bool: return "a boolean";
    case OptionType::String: return "a string";
    case OptionType::Numbers: return "a number, or numbers separated by commas";
  }
  return "?";
}

// The C setter that takes a value of that type (acc_options_set reads any from text).
const char* setter_name(OptionType type) {
  switch (type) {
    case OptionType::Int:
      return "acc_options_set_int";
    case OptionType::Double:
      return "acc_options_set_double";
    case OptionType::Bool:
      return "acc_options_set_bool";
    case OptionType::String:
      return "acc_options_set_string";
    case OptionType::Numbers:
      return "acc_options_set";
  }
  return "?";
}

// A bound as its option is written: an integer option's in all its digits (3153600000, not 3.1536e+09).
std::string bound_text(const OptionSpec& spec, double bound) {
  return spec.type == OptionType::Int ? std::to_string(static_cast<int64_t>(bound)) : number_text(bound);
}

std::string value_kind(const OptionValue& value) {
  if (std::holds_alternative<int64_t>(value)) return "the integer";
  if (std::holds_alternative<double>(value)) return "the number";
  if (std::holds_alternative<bool>(value)) return "the boolean";
  return "the text";
}

// A decimal number, the whole of `text` (strtod also reads hex floats and skips leading blanks); a
// value too small for a double is its nearest (0 or a subnormal), not an error.
std::optional<double> parse_decimal(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || text.find_first_of("xX") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const bool underflow = errno == ERANGE && std::fabs(v) <= std::numeric_limits<double>::min();
  if (*end || (errno && !underflow)) return std::nullopt;
  return v;
}


}  // namespace

std::string to_text(const OptionValue& value) {
  struct {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return number_text(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return v; }
  } visitor;
  return std::visit(visitor, value);
}

std::optional<bool> parse_bool(std::string text) {
  // Accelerate's str_to_bool.
  text = lowercase(std::move(text));
  for (const char* t : {"1", "true", "yes", "y", "on", "t"})
    if (text == t) return true;
  for (const char* f : {"0", "false", "no", "n", "off", "f"})
    if (text == f) return false;
  return std::nullopt;
}

std::string number_text(double value) {
  std::string text = concat(value);  // six digits, the form users know, where that is exact
  if (std::strtod(text.c_str(), nullptr) == value) return text;
  char digits[32];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;  // the shortest exact one
  return std::string(digits, end);
}

std::vector<double> option_numbers(const OptionValue& value) {
  if (std::holds_alternative<double>(value)) return {std::get<double>(value)};
  if (std::holds_alternative<int64_t>(value)) return {static_cast<double>(std::get<int64_t>(value))};
  require(std::holds_alternative<std::string>(value), "a list of numbers is a text, got '", to_text(value), "'");
  const std::string& text = std::get<std::string>(value);
  std::vector<double> numbers;
  for (const std::string& item : split_trimmed(text, ',')) {
    const std::optional<double> number = parse_decimal(item);
    require(number.has_value(), "'", text, "' is not numbers separated by commas");
    numbers.push_back(*number);
  }
  return numbers;
}

OptionValue numbers_value(const std::vector<double>& numbers) {
  if (numbers.size() == 1) return numbers[0];
  std::string text;
  for (double v : numbers) text += (text.empty() ? "" : ",") + number_text(v);
  return text;
}

const char* options_kind_name(OptionsKind kind) {
  switch (kind) {
    case OptionsKind::Optimizer: return "optimizer";
    case OptionsKind::Scheduler: return "scheduler";
    case OptionsKind::DataLoader: return "dataloader";
    case OptionsKind::Accelerator: return "accelerator";
    case OptionsKind::Lora: return "lora";
    case OptionsKind::Profile: return "profile";
    case OptionsKind::AveragedModel: return "averaged_model";
    case OptionsKind::TrainableTokens:
      return "trainable_tokens";
    case OptionsKind::WeightedAdapter:
      return "weighted_adapter";
    case OptionsKind::Eva:
      return "eva";
    case OptionsKind::Ia3:
      return "ia3";
    case OptionsKind::Loha:
      return "loha";
    case OptionsKind::Lokr:
      return "lokr";
    case OptionsKind::Vera:
      return "vera";
    case OptionsKind::Oft:
      return "oft";
    case OptionsKind::Adalora:
      return "adalora";
    case OptionsKind::Boft:
      return "boft";
    case OptionsKind::Hra:
      return "hra";
    case OptionsKind::Fourierft:
      return "fourierft";
    case OptionsKind::LnTuning:
      return "ln_tuning";
    case OptionsKind::Miss:
      return "miss";
    case OptionsKind::C3a:
      return "c3a";
    case OptionsKind::Shira:
      return "shira";
    case OptionsKind::Randlora:
      return "randlora";
    case OptionsKind::Delora:
      return "delora";
    case OptionsKind::Road:
      return "road";
    case OptionsKind::Gralora:
      return "gralora";
    case OptionsKind::Hira:
      return "hira";
    case OptionsKind::Pvera:
      return "pvera";
  }
  return "?";
}

OptionSpec& OptionSchema::add(std::string key, OptionType type, std::string doc) {
  if (find(key)) fail(Status::Internal, "option '", key, "' is in the ", options_kind_name(kind), " table twice");
  specs.push_back(OptionSpec{std::move(key), type, std::nullopt, std::nullopt, std::nullopt, {}, std::move(doc)});
  return specs.back();
}

const OptionSpec* OptionSchema::find(const std::string& key) const {
  for (const auto& s : specs)
    if (s.key == key) return &s;
  return nullptr;
}

const OptionSpec& Options::spec(const std::string& key) const {
  if (const OptionSpec* s = schema_->find(key)) return *s;
  std::string known;
  for (const auto& s : schema_->specs) known += (known.empty() ? "" : ", ") + s.key;
  fail(Status::InvalidArgument, "unknown ", options_kind_name(kind()), " option '", key, "' (known: ", known, ")");
}

void Options::set(const std::string& key, OptionValue value) {
  const OptionSpec& s = spec(key);
  const bool numbers = s.type == OptionType::Numbers;
  if ((s.type == OptionType::Double || numbers) && std::holds_alternative<int64_t>(value))
    value = static_cast<double>(std::get<int64_t>(value));
  const bool type_ok = (s.type == OptionType::Int && std::holds_alternative<int64_t>(value)) ||
                       (s.type == OptionType::Double && std::holds_alternative<double>(value)) ||
                       (s.type == OptionType::Bool && std::holds_alternative<bool>(value)) ||
                       (s.type == OptionType::String && std::holds_alternative<std::string>(value)) ||
                       (numbers && !std::holds_alternative<bool>(value));
  require(type_ok, "option '", key, "' takes ", type_name(s.type), ", got ", value_kind(value), " '", to_text(value),
          "' (set it with ", setter_name(s.type), ", or as text with acc_options_set)");
  if (s.type == OptionType::Int || s.type == OptionType::Double || numbers) {
    std::vector<double> checked;
    if (numbers) {
      try {
        checked = option_numbers(value);
      } catch (const Error&) {
        fail(Status::InvalidArgument, "option '", key, "' takes ", type_name(s.type), ", got '", to_text(value), "'");
      }
    } else {
      checked = {s.type == OptionType::Int ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value)};
    }
    // The value against a bound (-1, 0, 1); an integer compared exactly, as a double would round those
    // past 2^53 (2^53 + 1 passing a bound of 2^53).
    auto compare = [&](double v, double bound) {
      const long double a = s.type == OptionType::Int ? static_cast<long double>(std::get<int64_t>(value)) : v;
      return a < bound ? -1 : a > bound ? 1 : 0;
    };
    for (const double v : checked) {
      require(std::isfinite(v), "option '", key, "' must be finite, got ", v);
      // The messages are built only on failure: a bound is read only where there is one.
      if (s.min && compare(v, *s.min) < 0)
        fail(Status::InvalidArgument, "option '", key, "' must be at least ", bound_text(s, *s.min), ", got ",
             to_text(value));
      if (s.max && compare(v, *s.max) > 0)
        fail(Status::InvalidArgument, "option '", key, "' must be at most ", bound_text(s, *s.max), ", got ",
             to_text(value));
    }
    if (numbers) value = numbers_value(checked);  // blanks gone, every digit exact
  }
  if (!s.int_choices.empty() && s.type == OptionType::Int &&
      std::find(s.int_choices.begin(), s.int_choices.end(), std::get<int64_t>(value)) == s.int_choices.end()) {
    std::string list;
    for (const int64_t c : s.int_choices) list += (list.empty() ? "" : ", ") + std::to_string(c);
    fail(Status::InvalidArgument, "option '", key, "' must be one of ", list, ", got ", to_text(value));
  }
  if (!s.choices.empty()) {
    bool allowed = false;
    std::string list;
    for (const auto& c : s.choices) {
      allowed = allowed || c == std::get<std::string>(value);
      list += (list.empty() ? "" : ", ") + c;
    }
    if (!allowed && s.check)
      s.check(std::get<std::string>(value));
    else
      require(allowed, "option '", key, "' must be one of ", list, ", got '", to_text(value), "'");
  }
  values_[key] = std::move(value);
}

void Options::set_from_text(const std::string& key, const std::string& text) {
  const OptionSpec& s = spec(key);
  auto bad = [&]() { fail(Status::InvalidArgument, "option '", key, "' takes ", type_name(s.type), ", got '", text, "'"); };
  // strtoll/strtod skip leading blanks but stop at trailing ones: refuse both alike.
  const bool blank_first = !text.empty() && std::isspace(static_cast<unsigned char>(text[0]));
  switch (s.type) {
    case OptionType::Int: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || blank_first || *end || errno) bad();
      return set(key, static_cast<int64_t>(v));
    }
    case OptionType::Double: {
      const std::optional<double> v = parse_decimal(text);
      if (!v) bad();
      return set(key, *v);
    }
    case OptionType::Numbers: return set(key, text);  // set() reads the numbers
    case OptionType::Bool: {
      auto flag = parse_bool(text);
      if (!flag) bad();
      return set(key, *flag);
    }
    case OptionType::String: return set(key, text);
  }
}

std::optional<OptionValue> Options::value_set(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<OptionValue> Options::lookup(const std::string& key) const {
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  return spec(key).fallback;
}

std::string Options::get_text(const std::string& key) const {
  auto value = lookup(key);
  return value ? to_text(*value) : "";
}

std::vector<std::string> Options::keys_set() const {
  std::vector<std::string> keys;
  for (const auto& item : values_) keys.push_back(item.first);
  return keys;
}

int64_t Options::get_int(const std::string& key, int64_t fallback) const {
  auto v = lookup(key);
  return v ? std::get<int64_t>(*v) : fallback;
}

double Options::get_double(const std::string& key, double fallback) const {
  auto v = lookup(key);
  return v ? std::get<double>(*v) : fallback;
}

bool Options::get_bool(const std::string& key, bool fallback) const {
  auto v = lookup(key);
  return v ? std::get<bool>(*v) : fallback;
}

std::string Options::get_string(const std::string& key, const std::string& fallback) const {
  auto v = lookup(key);
  return v ? std::get<std::string>(*v) : fallback;
}

const std::vector<std::string>& mixed_precision_choices() {
  static const std::vector<std::string> choices = {"no", "fp16", "bf16"};
  return choices;
}

bool is_mixed_precision(const std::string& mode) {
  const auto& choices = mixed_precision_choices();
  return std::find(choices.begin(), choices.end(), mode) != choices.end();
}

}  // namespace acc

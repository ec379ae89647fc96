// Typed key/value options checked against a schema: the keys of one options kind, each with its
// type, default, bounds or choices and a one-line doc. Setting an unknown key, or a value of the
// wrong type or out of range, fails with a message that names the key. Each kind's schema is a
// table written once beside the settings it fills (common/option_table.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace acc {

using OptionValue = std::variant<int64_t, double, bool, std::string>;

// A value as text ("4", "0.9", "true").
std::string to_text(const OptionValue& value);

// Numbers: one number, or one per parameter group as text separated by commas ("0.1,0.01", as
// PyTorch's schedulers take a float or a list); kept as a double or as that text.
enum class OptionType { Int, Double, Bool, String, Numbers };

struct OptionSpec {
  std::string key;
  OptionType type;
  std::optional<OptionValue> fallback;  // the default; none when a consumer decides
  std::optional<double> min;            // inclusive bounds for numbers
  std::optional<double> max;
  std::vector<std::string> choices;     // allowed strings, if restricted
  std::string doc;                      // one line
  // Where set, a string the choices do not list is given to it, which refuses it (throws) or lets it
  // pass: a family the choices cannot list ("pissa_niter_<n>").
  std::function<void(const std::string&)> check{};
  std::vector<int64_t> int_choices{};  // allowed integers, if restricted beyond the bounds

  OptionSpec& at_least(double bound) { return min = bound, *this; }
  OptionSpec& at_most(double bound) { return max = bound, *this; }
  OptionSpec& one_of(std::vector<std::string> allowed) { return choices = std::move(allowed), *this; }
  OptionSpec& one_of_ints(std::vector<int64_t> allowed) { return int_choices = std::move(allowed), *this; }
  OptionSpec& checked_by(std::function<void(const std::string&)> f) { return check = std::move(f), *this; }
};

// The same values as acc_options_kind.
enum class OptionsKind : int {
  Optimizer = 1,
  Scheduler = 2,
  DataLoader = 3,
  Accelerator = 4,
  Lora = 5,
  Profile = 6,
  AveragedModel = 7,
  TrainableTokens = 8,
  WeightedAdapter = 9,
  Eva = 10,
  Ia3 = 11,
  Loha = 12,
  Lokr = 13,
  Vera = 14,
  Oft = 15,
  Adalora = 16,
  Boft = 17,
  Hra = 18,
  Fourierft = 19,
  LnTuning = 20,
  Miss = 21,
  C3a = 22,
  Shira = 23,
  Randlora = 24,
  Delora = 25,
  Road = 26,
  Gralora = 27,
  Hira = 28,
  Pvera = 29
};

const char* options_kind_name(OptionsKind kind);

// The keys of one options kind, in the order errors list them.
struct OptionSchema {
  // `fill` adds the keys, in the order errors list them.
  explicit OptionSchema(OptionsKind kind, const std::function<void(OptionSchema&)>& fill = {}) : kind(kind) {
    if (fill) fill(*this);
  }
  OptionSchema(const OptionSchema&) = delete;  // Options point at their schema: one per kind
  OptionSchema& operator=(const OptionSchema&) = delete;

  // A key whose default the consumer decides (an optimizer's defaults differ by algorithm).
  OptionSpec& add(std::string key, OptionType type, std::string doc);
  const OptionSpec* find(const std::string& key) const;

  OptionsKind kind;
  std::vector<OptionSpec> specs;
};

// Text that reads back as exactly `value`: six significant digits where they are exact ("0.0001"),
// else the shortest exact form ("0.0012345678901").
std::string number_text(double value);

// The numbers of a Numbers option's value: one for a number, each of a text's comma-separated ones.
// Throws for a text that is not such a list.
std::vector<double> option_numbers(const OptionValue& value);
// How a Numbers option keeps `numbers`: one as a number, several as their exact text with commas.
OptionValue numbers_value(const std::vector<double>& numbers);

// Accelerate's spellings of a flag (1/0, true/false, yes/no, y/n, on/off, t/f; any case).
std::optional<bool> parse_bool(std::string text);

class Options {
 public:
  // `schema` outlives the options (the schemas are the tables' static instances).
  explicit Options(const OptionSchema& schema) : schema_(&schema) {}

  OptionsKind kind() const { return schema_->kind; }
  const OptionSchema& schema() const { return *schema_; }
  void set(const std::string& key, OptionValue value);  // ints are accepted for double keys
  void set_from_text(const std::string& key, const std::string& text);
  bool has(const std::string& key) const { return values_.count(key) > 0; }  // set explicitly
  std::string get_text(const std::string& key) const;
  std::vector<std::string> keys_set() const;
  // The value set explicitly; none when unset.
  std::optional<OptionValue> value_set(const std::string& key) const;

  // The value set, else the schema's default, else `fallback`.
  int64_t get_int(const std::string& key, int64_t fallback = 0) const;
  double get_double(const std::string& key, double fallback = 0.0) const;
  bool get_bool(const std::string& key, bool fallback = false) const;
  std::string get_string(const std::string& key, const std::string& fallback = "") const;

 private:
  const OptionSpec& spec(const std::string& key) const;
  std::optional<OptionValue> lookup(const std::string& key) const;

  const OptionSchema* schema_;
  std::map<std::string, OptionValue> values_;
};

// The values of the accelerator's mixed_precision option ("no", "fp16", "bf16"): its table, the
// CLI, the launcher and the config file check against this one list.
const std::vector<std::string>& mixed_precision_choices();
bool is_mixed_precision(const std::string& mode);

}  // namespace acc

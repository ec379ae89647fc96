// One table per options kind, written once beside the settings struct it fills: each key with the
// member it goes to (a sub-config's member too), a one-line doc and its bounds or choices. The type
// comes from the member's type and the default from the struct's member initializer, so neither is
// written twice; the schema Options checks against, the copy into the struct and the header's
// documented key list (tests/cpp/test_options_doc.cpp) all come from the table.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/options.h"

namespace acc {
namespace option_table_detail {

template <class T>
struct Convert {  // numbers and flags
  static_assert(std::is_arithmetic_v<T>, "an option member is a number, a flag, a string or an optional one");
  static constexpr OptionType type = std::is_same_v<T, bool>            ? OptionType::Bool
                                     : std::is_floating_point_v<T> ? OptionType::Double
                                                                   : OptionType::Int;
  static std::optional<OptionValue> to(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return OptionValue(v);
    else if constexpr (std::is_floating_point_v<T>) return OptionValue(static_cast<double>(v));
    else return OptionValue(static_cast<int64_t>(v));
  }
  static T from(const OptionValue& v) {
    if constexpr (std::is_same_v<T, bool>) return std::get<bool>(v);
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(std::get<double>(v));
    else return static_cast<T>(std::get<int64_t>(v));
  }
};

template <>
struct Convert<std::string> {
  static constexpr OptionType type = OptionType::String;
  static std::optional<OptionValue> to(const std::string& v) { return OptionValue(v); }
  static std::string from(const OptionValue& v) { return std::get<std::string>(v); }
};

template <>
struct Convert<std::vector<double>> {  // a number, or one per parameter group
  static constexpr OptionType type = OptionType::Numbers;
  static std::optional<OptionValue> to(const std::vector<double>& v) { return numbers_value(v); }
  static std::vector<double> from(const OptionValue& v) { return option_numbers(v); }
};

template <class T>
struct Convert<std::optional<T>> {  // unset by default: no default value
  static constexpr OptionType type = Convert<T>::type;
  static std::optional<OptionValue> to(const std::optional<T>& v) {
    return v ? Convert<T>::to(*v) : std::nullopt;
  }
  static std::optional<T> from(const OptionValue& v) { return Convert<T>::from(v); }
};

// s.*m, or (s.*m).*n... for a member of a sub-config; const where `s` is.
template <class Object, class S, class M>
auto& reach(Object& s, M S::*member) {
  return s.*member;
}
template <class Object, class S, class M, class... Rest>
auto& reach(Object& s, M S::*member, Rest... rest) {
  return reach(s.*member, rest...);
}

}  // namespace option_table_detail

template <class Settings>
class OptionTable : public OptionSchema {
 public:
  // `fill` binds the keys, in the order errors list them.
  OptionTable(OptionsKind kind, const std::function<void(OptionTable&)>& fill) : OptionSchema(kind) { fill(*this); }

  using Setter = std::function<void(Settings&, const OptionValue&)>;
  using Getter = std::function<std::optional<OptionValue>(const Settings&)>;

  // A key stored in the member that `path` reaches: &Settings::m, or &Settings::sub, &Sub::m.
  template <class... Path>
  OptionSpec& bind(std::string key, std::string doc, Path... path) {
    using Member = std::decay_t<decltype(option_table_detail::reach(std::declval<Settings&>(), path...))>;
    using C = option_table_detail::Convert<Member>;
    return bind_with(
        std::move(key), C::type, std::move(doc),
        [=](Settings& s, const OptionValue& v) { option_table_detail::reach(s, path...) = C::from(v); },
        [=](const Settings& s) { return C::to(option_table_detail::reach(s, path...)); });
  }

  // A key with its own conversion (a device parsed from its name).
  OptionSpec& bind_with(std::string key, OptionType type, std::string doc, Setter set, Getter get) {
    OptionSpec& spec = add(std::move(key), type, std::move(doc));
    spec.fallback = get(Settings{});
    fields_.push_back({std::move(set), std::move(get)});
    return spec;
  }

  // Copies the keys set in `options` into `settings`; the others keep what they hold.
  void copy(const Options& options, Settings& settings) const {
    for (size_t i = 0; i < specs.size(); ++i)
      if (auto value = options.value_set(specs[i].key)) fields_[i].set(settings, *value);
  }
  Settings read(const Options& options) const {
    Settings settings;
    copy(options, settings);
    return settings;
  }
  // What `settings` holds for `key` (none where its member is unset).
  std::optional<OptionValue> value(const Settings& settings, const std::string& key) const {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].key == key) return fields_[i].get(settings);
    return std::nullopt;
  }

 private:
  struct Field {
    Setter set;
    Getter get;
  };
  std::vector<Field> fields_;  // one per spec, in the same order
};

}  // namespace acc

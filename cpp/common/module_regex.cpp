#include "common/module_regex.h"

#include <memory>
#include <regex>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

// The repetition that starts at `expression[i]`, if any: none, a bounded one that repeats at most
// once (?, {0,1}, {1}), or one that repeats more (*, +, {n,}, {n,m} with m > 1). `length` is its
// number of characters.
enum class Repetition { None, AtMostOnce, Many };
Repetition repetition_at(const std::string& expression, size_t i, size_t* length) {
  *length = 1;
  if (i >= expression.size()) return Repetition::None;
  const char c = expression[i];
  if (c == '*' || c == '+') return Repetition::Many;
  if (c == '?') return Repetition::AtMostOnce;
  if (c != '{') return Repetition::None;
  const size_t close = expression.find('}', i);
  if (close == std::string::npos) return Repetition::None;  // a literal '{'
  *length = close - i + 1;
  const std::string bounds = expression.substr(i + 1, close - i - 1);
  const size_t comma = bounds.find(',');
  if (comma == std::string::npos) return bounds == "0" || bounds == "1" ? Repetition::AtMostOnce : Repetition::Many;
  const std::string upper = bounds.substr(comma + 1);
  return upper == "0" || upper == "1" ? Repetition::AtMostOnce : Repetition::Many;
}

// std::regex compiles and matches by recursion with backtracking: a pattern nested thousands deep
// overflows the stack, and ambiguous patterns take exponential or high polynomial time on a name
// they do not match: a repeated group that holds a choice or a repetition ((a|a)*, (a+)+), many
// choices in a row ((.|.)(.|.)...), many repetitions in a row (.*.*.*...). Module names are short
// and PEFT's patterns simple, so patterns past these bounds are refused rather than run.
void check_regex_cost(const std::string& expression, const std::string& key) {
  constexpr size_t kMaxLength = 1000, kMaxDepth = 32, kMaxRepetitions = 4, kMaxChoices = 1024;
  const auto refuse = [&](const std::string& why) {
    fail(Status::InvalidArgument, key, " regular expression '", expression, "' ", why,
         ", which can take exponential or high polynomial time to match: write it more simply");
  };
  require(expression.size() <= kMaxLength, key, " regular expression is ", expression.size(),
          " characters long (at most ", kMaxLength, ")");
  struct Group {
    size_t alternatives = 1;
    bool holds_choice_or_repetition = false;
  };
  std::vector<Group> open{Group{}};  // the whole expression, then each open group
  size_t repetitions = 0, choices = 1;
  bool in_class = false;
  for (size_t i = 0; i < expression.size(); ++i) {
    const char c = expression[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      in_class = c != ']';
      continue;
    }
    size_t length = 1;
    if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      open.emplace_back();
      if (i + 2 < expression.size() && expression[i + 1] == '?') i += 2;  // (?:  (?=  (?!
      if (open.size() - 1 > kMaxDepth)
        fail(Status::InvalidArgument, key, " regular expression '", expression, "' nests groups deeper than ",
             kMaxDepth);
    } else if (c == '|') {
      ++open.back().alternatives;
      open.back().holds_choice_or_repetition = true;
    } else if (c == ')' && open.size() > 1) {
      const Group group = open.back();
      open.pop_back();
      choices *= group.alternatives;
      if (choices > kMaxChoices)
        refuse("chains more than " + std::to_string(kMaxChoices) + " ways through its choices");
      const Repetition repeated = repetition_at(expression, i + 1, &length);
      if (repeated == Repetition::Many && group.holds_choice_or_repetition)
        refuse("repeats a group that holds a choice or a repetition (like (a|b)* or (a+)+)");
      if (repeated == Repetition::Many) ++repetitions;
      if (group.holds_choice_or_repetition || repeated != Repetition::None)
        open.back().holds_choice_or_repetition = true;
      if (repeated != Repetition::None) i += length;
    } else if (const Repetition r = repetition_at(expression, i, &length); r != Repetition::None) {
      open.back().holds_choice_or_repetition = true;
      if (r == Repetition::Many) ++repetitions;
      i += length - 1;
    }
    if (repetitions > kMaxRepetitions)
      refuse("holds more than " + std::to_string(kMaxRepetitions) + " repetitions (*, +, {n,})");
  }
  if (open.front().alternatives > kMaxChoices) refuse("chains more than " + std::to_string(kMaxChoices) + " choices");
}

}  // namespace

namespace {

std::shared_ptr<const std::regex> compiled_module_regex(const std::string& expression, const std::string& key) {
  check_regex_cost(expression, key);
  try {
    return std::make_shared<const std::regex>(expression);
  } catch (const std::regex_error& e) {
    fail(Status::InvalidArgument, key, " regular expression '", expression, "' is invalid: ", e.what());
  }
}

}  // namespace

std::function<bool(const std::string&)> module_regex(const std::string& expression, const std::string& key) {
  auto compiled = compiled_module_regex(expression, key);
  return [compiled](const std::string& module) { return std::regex_match(module, *compiled); };
}

std::function<std::optional<std::string>(const std::string&)> module_regex_group(const std::string& expression,
                                                                                 const std::string& key) {
  auto compiled = compiled_module_regex(expression, key);
  return [compiled](const std::string& module) -> std::optional<std::string> {
    std::smatch match;
    if (!std::regex_match(module, match, *compiled) || match.size() < 2 || !match[1].matched) return std::nullopt;
    return match[1].str();
  };
}

}  // namespace acc

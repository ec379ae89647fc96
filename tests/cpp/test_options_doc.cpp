// The option keys accelerate.h documents for each kind are exactly the keys its table accepts (a
// key added to one and not the other fails here), and the defaults it states for numbers and flags
// ("key (int, ..., default 25") are the tables' (the settings structs' member initializers).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "accelerator/option_schemas.h"

namespace {

std::string header_text() {
  std::ifstream in(std::string(ACC_SOURCE_DIR) + "/capi/include/accelerate.h");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The comment block "Keys of ACC_OPTIONS_<kind>:" up to the next such block or the banner's end.
std::string keys_block(const std::string& header, const std::string& kind) {
  const std::string start = "Keys of ACC_OPTIONS_" + kind;
  const auto at = header.find(start);
  EXPECT_NE(at, std::string::npos) << start;
  if (at == std::string::npos) return "";
  auto end = header.find("Keys of ACC_OPTIONS_", at + start.size());
  end = std::min(end, header.find("* ----", at));
  return header.substr(at, end - at);
}

// Keys written as "name (type" or "name (\"choice\"", and names listed before one ("beta1, beta2 (").
std::set<std::string> documented_keys(const std::string& block) {
  std::set<std::string> keys;
  const std::regex entry(R"(([A-Za-z][A-Za-z0-9_]*)((?:, [A-Za-z][A-Za-z0-9_]*)*) \((?:double|int|bool|string|"))");
  for (std::sregex_iterator it(block.begin(), block.end(), entry), end; it != end; ++it) {
    keys.insert((*it)[1]);
    const std::string more = (*it)[2];
    const std::regex name("[A-Za-z][A-Za-z0-9_]*");
    for (std::sregex_iterator n(more.begin(), more.end(), name); n != std::sregex_iterator(); ++n) keys.insert(n->str());
  }
  return keys;
}

std::set<std::string> schema_keys(acc::OptionsKind kind) {
  std::set<std::string> keys;
  for (const auto& spec : acc::option_schema(kind).specs) keys.insert(spec.key);
  return keys;
}

// "key (int|double|bool..., default VALUE" in a block, its comment prefixes removed (VALUE may be
// a fraction, "1/3").
std::map<std::string, std::string> documented_defaults(std::string block) {
  block = std::regex_replace(block, std::regex(R"(\n \*\s+)"), " ");
  std::map<std::string, std::string> defaults;
  const std::regex entry(R"(([A-Za-z][A-Za-z0-9_]*) \((?:int|double|bool)[^)]*?default ([0-9a-z.+-]+(?:/[0-9]+)?))");
  for (std::sregex_iterator it(block.begin(), block.end(), entry), end; it != end; ++it) defaults[(*it)[1]] = (*it)[2];
  return defaults;
}

double documented_number(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return std::stod(text);
  return std::stod(text.substr(0, slash)) / std::stod(text.substr(slash + 1));
}

// Every options kind, by its name in accelerate.h.
const std::pair<const char*, acc::OptionsKind> kKinds[] = {{"OPTIMIZER", acc::OptionsKind::Optimizer},
                                                           {"SCHEDULER", acc::OptionsKind::Scheduler},
                                                           {"DATALOADER", acc::OptionsKind::DataLoader},
                                                           {"ACCELERATOR", acc::OptionsKind::Accelerator},
                                                           {"LORA", acc::OptionsKind::Lora},
                                                           {"PROFILE", acc::OptionsKind::Profile},
                                                           {"AVERAGED_MODEL", acc::OptionsKind::AveragedModel},
                                                           {"TRAINABLE_TOKENS", acc::OptionsKind::TrainableTokens},
                                                           {"WEIGHTED_ADAPTER", acc::OptionsKind::WeightedAdapter},
                                                           {"EVA", acc::OptionsKind::Eva},
                                                           {"IA3", acc::OptionsKind::Ia3},
                                                           {"LOHA", acc::OptionsKind::Loha},
                                                           {"LOKR", acc::OptionsKind::Lokr},
                                                           {"VERA", acc::OptionsKind::Vera},
                                                           {"OFT", acc::OptionsKind::Oft},
                                                           {"ADALORA", acc::OptionsKind::Adalora},
                                                           {"BOFT", acc::OptionsKind::Boft},
                                                           {"HRA", acc::OptionsKind::Hra},
                                                           {"FOURIERFT", acc::OptionsKind::Fourierft},
                                                           {"LN_TUNING", acc::OptionsKind::LnTuning},
                                                           {"MISS", acc::OptionsKind::Miss},
                                                           {"C3A", acc::OptionsKind::C3a},
                                                           {"SHIRA", acc::OptionsKind::Shira},
                                                           {"RANDLORA", acc::OptionsKind::Randlora},
                                                           {"DELORA", acc::OptionsKind::Delora},
                                                           {"ROAD", acc::OptionsKind::Road},
                                                           {"GRALORA", acc::OptionsKind::Gralora},
                                                           {"HIRA", acc::OptionsKind::Hira},
                                                           {"PVERA", acc::OptionsKind::Pvera}};

}  // namespace

TEST(OptionsDoc, TheHeaderStatesTheTablesDefaults) {
  const std::string header = header_text();
  size_t checked = 0;
  for (const auto& [name, kind] : kKinds) {
    if (kind == acc::OptionsKind::Optimizer) continue;  // its defaults differ by algorithm: none in the table
    for (const auto& [key, text] : documented_defaults(keys_block(header, name))) {
      const acc::OptionSpec* spec = acc::option_schema(kind).find(key);
      ASSERT_NE(spec, nullptr) << key;
      ASSERT_TRUE(spec->fallback) << key << " is documented with a default and has none";
      if (spec->type == acc::OptionType::Bool)
        EXPECT_EQ(text, std::get<bool>(*spec->fallback) ? "true" : "false") << key;
      else if (spec->type == acc::OptionType::Int)
        EXPECT_EQ(std::stod(text), static_cast<double>(std::get<int64_t>(*spec->fallback))) << key;
      else
        EXPECT_EQ(documented_number(text), std::get<double>(*spec->fallback)) << key;
      ++checked;
    }
  }
  EXPECT_GE(checked, 30u);  // the pattern still finds the header's defaults
}

TEST(OptionsDoc, TheHeaderDocumentsExactlyTheKeysEachKindAccepts) {
  const std::string header = header_text();
  ASSERT_FALSE(header.empty());
  for (const auto& [name, kind] : kKinds) EXPECT_EQ(documented_keys(keys_block(header, name)), schema_keys(kind)) << name;
}

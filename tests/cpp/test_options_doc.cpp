// The option keys accelerate.h documents for each kind are exactly the keys its schema accepts:
// a key added to one and not the other fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

#include "common/options.h"

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
  const std::regex entry(R"(([a-z][a-z0-9_]*)((?:, [a-z][a-z0-9_]*)*) \((?:double|int|bool|string|"))");
  for (std::sregex_iterator it(block.begin(), block.end(), entry), end; it != end; ++it) {
    keys.insert((*it)[1]);
    const std::string more = (*it)[2];
    const std::regex name("[a-z][a-z0-9_]*");
    for (std::sregex_iterator n(more.begin(), more.end(), name); n != std::sregex_iterator(); ++n) keys.insert(n->str());
  }
  return keys;
}

std::set<std::string> schema_keys(acc::OptionsKind kind) {
  std::set<std::string> keys;
  for (const auto& spec : acc::option_schema(kind)) keys.insert(spec.key);
  return keys;
}

}  // namespace

TEST(OptionsDoc, TheHeaderDocumentsExactlyTheKeysEachKindAccepts) {
  const std::string header = header_text();
  ASSERT_FALSE(header.empty());
  const std::pair<const char*, acc::OptionsKind> kinds[] = {{"OPTIMIZER", acc::OptionsKind::Optimizer},
                                                             {"SCHEDULER", acc::OptionsKind::Scheduler},
                                                             {"DATALOADER", acc::OptionsKind::DataLoader},
                                                             {"ACCELERATOR", acc::OptionsKind::Accelerator}};
  for (const auto& [name, kind] : kinds) EXPECT_EQ(documented_keys(keys_block(header, name)), schema_keys(kind)) << name;
}

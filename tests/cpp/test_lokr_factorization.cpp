// LyCORIS' factorization, which decides every LoKr factor's shape (model/peft/lokr.h), against PEFT's
// restated in tests/data/lora_lokr_case.py (lora_cases.json "lokr"): dimensions 1 to 129 and model
// sizes, with factors that divide them, that do not, 0, -1 and another negative one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/peft/lokr.h"

TEST(LokrFactorization, SplitsEveryDimensionAsLycoris) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  if (!dir) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  std::ifstream in(std::string(dir) + "/lora_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_lora_cases fixture";
  const auto splits = nlohmann::json::parse(in)["lokr"]["factorizations"];
  ASSERT_GT(splits.size(), 1000u);
  for (const auto& s : splits) {
    const int64_t dimension = s[0], factor = s[1];
    const auto [m, n] = acc::lokr_factorization(dimension, factor);
    EXPECT_EQ(m, s[2].get<int64_t>()) << dimension << " with factor " << factor;
    EXPECT_EQ(n, s[3].get<int64_t>()) << dimension << " with factor " << factor;
  }
}

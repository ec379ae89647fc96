// bitsandbytes' round trips that LoftQ quantises with (model/peft/loftq.h), against its PyTorch
// implementation restated (tests/data/lora_loftq_case.py, lora_cases.json "loftq"): NF4 in blocks of
// 64 (a shorter last one, a block of zeros, values on the buckets' edges) and row-wise int8 through
// float16, bit for bit; and NF4 quantising its own output to itself, which is why LoftQ's adapters
// read back into an already quantised model leave its weights as they are.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/peft/loftq.h"

namespace {

nlohmann::json loftq_case() {
  const char* dir = std::getenv("ACC_TEST_DATA");
  if (!dir) return nullptr;
  std::ifstream in(std::string(dir) + "/lora_cases.json");
  EXPECT_TRUE(in.good()) << "run the export_pytorch_lora_cases fixture";
  return in.good() ? nlohmann::json::parse(in)["loftq"] : nlohmann::json();
}

at::Tensor recorded(const nlohmann::json& t) {
  return at::tensor(t["values"].get<std::vector<float>>(), at::kFloat).reshape(t["shape"].get<std::vector<int64_t>>());
}

std::string largest_difference(const at::Tensor& a, const at::Tensor& b) {
  return std::to_string((a - b).abs().max().item<double>()) + " at " +
         std::to_string((a - b).abs().argmax().item<int64_t>());
}

}  // namespace

TEST(Loftq, RoundTripsEqualBitsandbytesBitForBit) {
  const auto c = loftq_case();
  if (c.is_null()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const at::Tensor probe = recorded(c["probe"]);
  const at::Tensor nf4 = acc::nf4_round_trip(probe), int8 = acc::int8_round_trip(probe);
  const at::Tensor expected_nf4 = recorded(c["probe_nf4"]), expected_int8 = recorded(c["probe_int8"]);
  EXPECT_TRUE(at::equal(nf4, expected_nf4)) << largest_difference(nf4, expected_nf4);
  EXPECT_TRUE(at::equal(int8, expected_int8)) << largest_difference(int8, expected_int8);
  EXPECT_EQ(nf4.scalar_type(), at::kFloat);
  EXPECT_EQ(nf4.sizes(), probe.sizes());
  // At most 16 values per block, each a code value times the block's absolute maximum.
  EXPECT_LE(std::get<0>(at::_unique(nf4.reshape(-1).slice(0, 64, 128))).numel(), 16);
}

TEST(Loftq, Nf4QuantisesItsOwnOutputToItself) {
  const auto c = loftq_case();
  if (c.is_null()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const at::Tensor once = acc::nf4_round_trip(recorded(c["probe"]));
  EXPECT_TRUE(at::equal(acc::nf4_round_trip(once), once));
}

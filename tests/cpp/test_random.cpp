// Random numbers as Python draws them: Accelerate's set_seed(seed, device_specific, deterministic),
// and numpy's RandomState.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/numpy_random_state.h"
#include "common/random.h"

TEST(SetSeed, DeviceSpecificAddsTheProcessIndexAndDeterministicStaysOn) {
  acc::set_seed(40, /*device_specific=*/true, /*process_index=*/2, /*deterministic=*/false);
  const at::Tensor specific = at::rand({4});
  acc::set_seed(42);
  EXPECT_TRUE(at::equal(specific, at::rand({4}))) << "seed 40 on process 2 is seed 42";
  acc::set_seed(40, /*device_specific=*/false, 2, false);
  const at::Tensor shared = at::rand({4});
  acc::set_seed(40);
  EXPECT_TRUE(at::equal(shared, at::rand({4})));

  EXPECT_THROW(acc::set_seed(UINT64_MAX, true, 1, false), acc::Error) << "past 2^64 - 1";
  acc::set_seed(UINT64_MAX, true, 0, false);  // the largest seed itself is fine

  const bool before = at::globalContext().deterministicAlgorithms();
  acc::set_seed(1, false, 0, /*deterministic=*/true);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  at::globalContext().setDeterministicAlgorithms(before, false);  // the rest of the suite as it was
}

// numpy.random.RandomState(seed).randint(1_000_000_000), which seeds PowerSGD's projections, as
// numpy drew it (tests/data/export_power_sgd_cases.py); its state survives a round trip as text.
TEST(NumpyRandomState, DrawsAsNumpyAndItsStateRoundTrips) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  ASSERT_NE(dir, nullptr);
  std::ifstream in(std::string(dir) + "/power_sgd_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_power_sgd_cases fixture";
  const auto draws = nlohmann::json::parse(in)["numpy_randint"];
  ASSERT_EQ(draws.size(), 4u);
  for (const auto& [seed, values] : draws.items()) {
    acc::NumpyRandomState rng(static_cast<uint32_t>(std::stoul(seed)));
    for (const auto& value : values) EXPECT_EQ(rng.randint(1000000000), value.get<int64_t>()) << "seed " << seed;
  }
  acc::NumpyRandomState a(5);
  a.randint(1000);
  acc::NumpyRandomState b;
  b.set_state_text(a.state_text());
  for (int i = 0; i < 700; ++i) ASSERT_EQ(a.randint(1u << 20), b.randint(1u << 20));  // past a refill of the 624 words
  EXPECT_EQ(a.randint(1), 0);
  EXPECT_THROW(a.randint(0), acc::Error);
  EXPECT_THROW(b.set_state_text("1 2 3"), acc::Error);
  EXPECT_THROW(b.set_state_text(a.state_text() + " 9"), acc::Error);
}

TEST(NumpyRandomState, AStateOutsideThe32BitWordsIsRefused) {
  acc::NumpyRandomState a(3);
  std::string text = a.state_text();
  acc::NumpyRandomState b;
  EXPECT_THROW(b.set_state_text("-1" + text.substr(text.find(' '))), acc::Error);
  EXPECT_THROW(b.set_state_text("4294967296" + text.substr(text.find(' '))), acc::Error);
  b.set_state_text(text);
  EXPECT_EQ(a.randint(1000000000), b.randint(1000000000));
}

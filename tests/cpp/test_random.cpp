// Accelerate's set_seed(seed, device_specific, deterministic) on its own.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>

#include "common/error.h"
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

// max_shard_size as huggingface_hub's parse_size_to_int reads it: a unit at the end and Python's
// float() of what comes before (a hunt's finding: "1.5e-1MB" and "1e5" were refused as units).
#include <gtest/gtest.h>

#include <string>

#include "checkpoint/pretrained_layout.h"
#include "common/error.h"

namespace {

TEST(ShardSizes, AreReadAsHuggingfaceHubReadsThem) {
  EXPECT_EQ(acc::parse_size("10GB"), 10'000'000'000);
  EXPECT_EQ(acc::parse_size(" 500 MB "), 500'000'000);
  EXPECT_EQ(acc::parse_size("1.5e-1MB"), 150'000);
  EXPECT_EQ(acc::parse_size("2.5KB"), 2'500);
  EXPECT_EQ(acc::parse_size("1e5"), 100'000);
  EXPECT_EQ(acc::parse_size("1GiB"), 1'073'741'824);
  for (const char* bad : {"MB", "1.5.2MB", "1e", "1 XB", "infMB", "nanGB", "-1MB", "0.1B", "1e30TB"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(acc::parse_size(bad), acc::Error);
  }
}

}  // namespace

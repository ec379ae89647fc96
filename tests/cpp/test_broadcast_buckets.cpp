// How parallel/broadcast.h groups a model's tensors: a bucket never passes its size (so the first
// broadcast of a large model needs no second copy of it), dtypes never mix, order is kept.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "parallel/broadcast.h"

namespace {

std::vector<int64_t> sizes_of(const std::vector<at::Tensor>& bucket) {
  std::vector<int64_t> sizes;
  for (const auto& t : bucket) sizes.push_back(t.numel());
  return sizes;
}

}  // namespace

TEST(BroadcastBuckets, SplitByDtypeAndSizeInOrder) {
  const at::Tensor f1 = at::zeros({4}), f2 = at::zeros({2, 2}), f3 = at::zeros({10}), f4 = at::zeros({1});
  const at::Tensor l1 = at::zeros({3}, at::kLong), empty = at::zeros({0});
  // 32 bytes a bucket: f1 (16) + f2 (16) fill one; f3 (40) travels alone; f4 starts the next.
  const auto buckets = acc::broadcast_buckets({f1, l1, f2, empty, f3, f4}, 32);
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(sizes_of(buckets[0]), (std::vector<int64_t>{3}));  // kLong sorts before kFloat
  EXPECT_EQ(buckets[0][0].scalar_type(), at::kLong);
  EXPECT_EQ(sizes_of(buckets[1]), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(sizes_of(buckets[2]), (std::vector<int64_t>{10}));
  EXPECT_EQ(sizes_of(buckets[3]), (std::vector<int64_t>{1}));
  // The buckets alias the tensors: what a broadcast writes into them lands in the model.
  buckets[1][1].fill_(5);
  EXPECT_EQ(f2.sum().item<float>(), 20.0f);
}

TEST(BroadcastBuckets, NothingToSendMakesNoBucket) {
  EXPECT_TRUE(acc::broadcast_buckets({}, 32).empty());
  EXPECT_TRUE(acc::broadcast_buckets({at::zeros({0}), at::zeros({0, 3})}, 32).empty());
}

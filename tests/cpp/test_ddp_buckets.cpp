// DDP's gradient buckets, laid out as PyTorch's DistributedDataParallel lays them out. On more than
// 2 processes the layout decides the order in which Gloo's ring adds each element, so matching
// PyTorch's numbers needs it: one bucket of every parameter until the first backward that averages
// gradients, then, from the next forward, buckets in the order that backward produced the gradients
// (1 MiB first, then bucket_cap_mb; every bucket bucket_cap_mb when it is not 25). The expected
// order comes from hooks on the parameters' gradients, not from the Reducer. Run on a Gloo group of
// this one process: the same Reducer, collectives of one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "parallel/data_parallel.h"
#include "group_of_one.h"

namespace {

using acc::BucketLayout;

// Two 1 MiB weights (512 x 512 floats): the small first bucket closes at the second one the
// backward reaches.
const char* const kWide = R"([{"type":"linear","in_features":512,"out_features":512},{"type":"tanh"},
    {"type":"linear","in_features":512,"out_features":512},{"type":"tanh"},
    {"type":"linear","in_features":512,"out_features":4}])";
constexpr size_t kMiB = 1024 * 1024;

std::shared_ptr<acc::Model> wide_model() {
  at::manual_seed(0);
  return acc::model_from_spec(kWide);
}

at::Tensor batch() { return at::sin(at::arange(8 * 512, at::kFloat).reshape({8, 512})); }

std::vector<at::Tensor> trainable(const acc::Model& model) {
  std::vector<at::Tensor> params;
  for (const auto& entry : model.named_parameters()) params.push_back(entry.second);
  return params;
}

// The order in which a backward of the model produces its parameters' gradients (hooks on them).
std::vector<size_t> gradient_order() {
  auto model = wide_model();
  const auto params = trainable(*model);
  std::vector<size_t> order;
  for (size_t i = 0; i < params.size(); ++i) params[i].register_hook([&order, i](const at::Tensor&) { order.push_back(i); });
  model->forward({batch()}).front().second.pow(2).sum().backward();
  return order;
}

// Buckets filled in `order` until each reaches its limit (the first limit, then the next; the last
// one for the rest), as the Reducer's rebuild fills them.
BucketLayout buckets_in_order(const std::vector<size_t>& order, const std::vector<at::Tensor>& params,
                              std::vector<size_t> limits) {
  BucketLayout layout(1);
  size_t bytes = 0, limit = 0;
  for (size_t i : order) {
    layout.back().push_back(i);
    bytes += params[i].numel() * params[i].element_size();
    if (bytes >= limits[limit]) {
      layout.emplace_back();
      bytes = 0;
      limit = std::min(limit + 1, limits.size() - 1);
    }
  }
  if (layout.back().empty()) layout.pop_back();
  return layout;
}

struct Ddp {
  std::shared_ptr<acc::Model> model = wide_model();
  std::unique_ptr<acc::DataParallel> engine;
  explicit Ddp(acc::DataParallelOptions options = {}) {
    engine = std::make_unique<acc::DataParallel>(model, acc_test::group_of_one(c10::Device(c10::kCPU), acc::Backend::Gloo),
                                                 options);
  }
  // A training forward and its backward, gradients averaged (`sync`) or kept local.
  void step(bool sync = true) {
    engine->before_forward(sync);
    auto outputs = model->forward({batch()});
    engine->after_forward(outputs, sync);
    engine->forward_done(sync);
    outputs.front().second.pow(2).sum().backward();
  }
};

}  // namespace

TEST(DdpBuckets, OneBucketUntilTheFirstAveragedBackwardThenTheGradientsOrder) {
  Ddp ddp;
  const auto params = trainable(*ddp.model);
  EXPECT_EQ(ddp.engine->layout(), BucketLayout({{0, 1, 2, 3, 4, 5}})) << "every parameter, in the model's order";
  EXPECT_FALSE(ddp.engine->saved_layout());
  ddp.step(/*sync=*/false);  // no_sync: nothing recorded
  ddp.step(/*sync=*/false);
  EXPECT_EQ(ddp.engine->layout(), BucketLayout({{0, 1, 2, 3, 4, 5}}));
  ddp.step();
  EXPECT_EQ(ddp.engine->layout(), BucketLayout({{0, 1, 2, 3, 4, 5}})) << "rebuilt at the next forward, not before";
  ddp.step();
  const BucketLayout expected = buckets_in_order(gradient_order(), params, {kMiB, 25 * kMiB});
  ASSERT_EQ(expected.size(), 2u) << "a 1 MiB first bucket, then the rest";
  EXPECT_EQ(ddp.engine->layout(), expected);
  EXPECT_EQ(ddp.engine->saved_layout(), std::optional<BucketLayout>(expected));
  ddp.step();
  EXPECT_EQ(ddp.engine->layout(), expected) << "rebuilt once";
}

TEST(DdpBuckets, ABucketCapOtherThan25MbAlsoCapsTheFirstBucket) {
  // Accelerate passes bucket_cap_mb on only when it is not DDP's default; DDP then has no 1 MiB
  // first bucket. 2 MiB holds the whole model here.
  acc::DataParallelOptions options;
  options.bucket_cap_mb = 2;
  Ddp ddp(options);
  ddp.step();
  ddp.step();
  const BucketLayout expected = buckets_in_order(gradient_order(), trainable(*ddp.model), {2 * kMiB});
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_EQ(ddp.engine->layout(), expected);
}

TEST(DdpBuckets, FindUnusedParametersKeepsTheModelOrderBuckets) {
  // DDP never rebuilds then: 1 MiB first (the first weight alone), the rest after, last bucket first.
  acc::DataParallelOptions options;
  options.find_unused_parameters = true;
  Ddp ddp(options);
  const BucketLayout expected{{1, 2, 3, 4, 5}, {0}};
  EXPECT_EQ(ddp.engine->layout(), expected);
  for (int i = 0; i < 3; ++i) ddp.step();
  EXPECT_EQ(ddp.engine->layout(), expected);
  EXPECT_FALSE(ddp.engine->saved_layout());
}

TEST(DdpBuckets, ARestoredLayoutIsKeptAndARestoreToNoneStartsOver) {
  Ddp trained;
  trained.step();
  trained.step();
  const BucketLayout rebuilt = trained.engine->layout();
  ASSERT_NE(rebuilt, BucketLayout({{0, 1, 2, 3, 4, 5}}));

  Ddp resumed;
  resumed.engine->restore_layout(rebuilt);
  EXPECT_EQ(resumed.engine->layout(), rebuilt);
  EXPECT_EQ(resumed.engine->saved_layout(), std::optional<BucketLayout>(rebuilt)) << "a save before any step keeps it";
  for (int i = 0; i < 3; ++i) resumed.step();
  EXPECT_EQ(resumed.engine->layout(), rebuilt) << "the rebuild after the first averaged backward lands on it again";
  resumed.engine->restore_layout(std::nullopt);
  EXPECT_EQ(resumed.engine->layout(), BucketLayout({{0, 1, 2, 3, 4, 5}})) << "a checkpoint from before the rebuild";
  EXPECT_FALSE(resumed.engine->saved_layout());
  resumed.step();
  resumed.step();
  EXPECT_EQ(resumed.engine->layout(), rebuilt);
}

TEST(DdpBuckets, LayoutsThatAreNotAPartitionOfTheParametersAreRefused) {
  Ddp ddp;
  const BucketLayout bad[] = {{{0, 1, 2, 3, 4}},           // parameter 5 in none
                              {{0, 1, 2, 3, 4, 5, 5}},     // twice
                              {{0, 1, 2}, {3, 4, 5, 6}},   // no parameter 6
                              {{0, 1, 2, 3, 4, 5}, {}}};   // an empty bucket
  for (const auto& layout : bad) {
    try {
      ddp.engine->restore_layout(layout);
      ADD_FAILURE() << "accepted a bad layout";
    } catch (const acc::Error& e) {
      EXPECT_EQ(e.status(), acc::Status::Io) << e.what();
    }
    EXPECT_EQ(ddp.engine->layout(), BucketLayout({{0, 1, 2, 3, 4, 5}})) << "changed before refusing";
  }
}

// DistributedDataParallelKwargs(gradient_as_bucket_view=True): each gradient is a view into its
// bucket (no copy of every gradient beside the buckets), before and after the rebuild, with the
// same values as without it.
TEST(DdpBuckets, GradientsAsBucketViewsShareTheBucketsAndKeepTheirValues) {
  acc::DataParallelOptions as_view;
  as_view.gradient_as_bucket_view = true;
  Ddp viewed(as_view), copied;
  for (int step = 0; step < 3; ++step) {
    viewed.step();
    copied.step();
    const auto v = trainable(*viewed.model), c = trainable(*copied.model);
    for (const auto& bucket : viewed.engine->layout())
      for (size_t i : bucket) {
        EXPECT_TRUE(at::equal(v[i].grad(), c[i].grad())) << "parameter " << i << " at step " << step;
        EXPECT_TRUE(v[i].grad().storage().is_alias_of(v[bucket.front()].grad().storage())) << "parameter " << i;
        if (i != bucket.front())
          EXPECT_FALSE(c[i].grad().storage().is_alias_of(c[bucket.front()].grad().storage())) << "parameter " << i;
      }
  }
}

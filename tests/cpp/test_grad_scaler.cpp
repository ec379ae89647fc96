// Dynamic loss scaling: scale, unscale once, skip on overflow, back off, grow.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "precision/grad_scaler.h"

TEST(GradScaler, ScalesUnscalesOnceAndDetectsOverflow) {
  acc::GradScaler scaler({/*init_scale=*/4.0, 2.0, 0.5, /*growth_interval=*/2}, c10::Device(c10::kCPU));
  EXPECT_DOUBLE_EQ(scaler.scale(at::ones({})).item<double>(), 4.0);
  at::Tensor g = at::tensor({1.0f, 2.0f});
  scaler.unscale({g});
  scaler.unscale({g});  // a second unscale in the same step changes nothing
  EXPECT_TRUE(at::equal(g, at::tensor({0.25f, 0.5f})));
  EXPECT_FALSE(scaler.found_inf());
  scaler.update();  // 1 good step
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 4.0);
  scaler.unscale({at::tensor({1.0f})});
  scaler.update();  // 2 good steps = growth_interval: the scale grows
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 8.0);
  at::Tensor bad = at::tensor({1.0f, std::numeric_limits<float>::infinity()});
  scaler.unscale({bad});
  EXPECT_TRUE(scaler.found_inf());
  scaler.update();  // overflow: back off, start counting again
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 4.0);
  EXPECT_FALSE(scaler.found_inf());
  scaler.unscale({at::tensor({std::numeric_limits<float>::quiet_NaN()})});
  EXPECT_TRUE(scaler.found_inf());
}

TEST(GradScaler, AcceleratesDefaults) {
  acc::GradScalerOptions defaults;
  EXPECT_EQ(defaults.init_scale, 65536.0);
  EXPECT_EQ(defaults.growth_factor, 2.0);
  EXPECT_EQ(defaults.backoff_factor, 0.5);
  EXPECT_EQ(defaults.growth_interval, 2000);
  EXPECT_THROW(acc::GradScaler({1.0, 0.5, 0.5, 10}, c10::Device(c10::kCPU)), std::exception);
}

// torch's rules step by step (init 8, growth 2, backoff 0.5, interval 3) over a pattern of good and
// overflowing steps, worked out by hand: a good step counts; the third in a row doubles the scale
// and resets the count; an overflow halves the scale and resets the count.
TEST(GradScaler, StateSequenceUnderInjectedOverflowFollowsTheRules) {
  acc::GradScaler scaler({8.0, 2.0, 0.5, 3}, c10::Device(c10::kCPU));
  const std::vector<bool> overflow = {false, false, false, true, false, true, false, false, false, false};
  const std::vector<double> scale = {8, 8, 16, 8, 8, 4, 4, 4, 8, 8};
  const std::vector<int64_t> tracker = {1, 2, 0, 0, 1, 0, 1, 2, 0, 1};
  for (size_t step = 0; step < overflow.size(); ++step) {
    const double before = scaler.current_scale();
    at::Tensor grad = at::tensor({before, overflow[step] ? std::numeric_limits<float>::infinity() : 2.0f * before});
    scaler.unscale({grad});
    EXPECT_EQ(scaler.found_inf(), overflow[step]) << "step " << step;
    if (!overflow[step]) EXPECT_TRUE(at::equal(grad, at::tensor({1.0f, 2.0f}))) << "step " << step;
    scaler.update();
    EXPECT_EQ(scaler.current_scale(), scale[step]) << "step " << step;
    EXPECT_EQ(scaler.growth_tracker(), tracker[step]) << "step " << step;
  }
}

TEST(GradScaler, StateRoundTripsForCheckpoints) {
  acc::GradScaler scaler({8.0, 2.0, 0.5, 3}, c10::Device(c10::kCPU));
  scaler.load_state(1024.0, 2);
  EXPECT_EQ(scaler.current_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  scaler.unscale({at::tensor({1.0f})});
  scaler.update();  // the third good step in a row
  EXPECT_EQ(scaler.current_scale(), 2048.0);
  EXPECT_THROW(scaler.load_state(-1.0, 0), std::exception);
  EXPECT_THROW(scaler.load_state(1.0, 3), std::exception);  // the tracker must stay below the interval
}

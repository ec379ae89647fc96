// Dynamic loss scaling: scale, unscale once, skip on overflow, back off, grow.
#include <gtest/gtest.h>

#include <limits>

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

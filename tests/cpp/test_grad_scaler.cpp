// Dynamic loss scaling: scale, unscale once, skip on overflow (per optimizer), back off, grow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "accelerator/accelerated_optimizer.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "precision/grad_scaler.h"
#include "precision/scaler_part.h"

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
  scaler.load_state(1024.0, 2, 1);
  EXPECT_EQ(scaler.current_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  scaler.unscale({at::tensor({1.0f})});
  scaler.update();  // the third good step in a row
  EXPECT_EQ(scaler.current_scale(), 2048.0);
  EXPECT_THROW(scaler.load_state(-1.0, 0, 1), std::exception);
  EXPECT_THROW(scaler.load_state(1.0, 3, 1), std::exception);  // the tracker must stay below the interval
  EXPECT_THROW(scaler.load_state(1.0, 0, 2), std::exception);  // more hysteresis than the scaler allows
}

TEST(GradScaler, OverflowIsPerOptimizerAndTheScaleChangesOncePerStep) {
  acc::GradScaler scaler({8.0, 2.0, 0.5, 2}, c10::Device(c10::kCPU));
  acc::OverflowFlag a, b;  // two optimizers' flags
  at::Tensor ga = at::tensor({8.0f, std::numeric_limits<float>::infinity()}), gb = at::tensor({16.0f});
  scaler.unscale({ga}, a);
  scaler.unscale({gb}, b);
  scaler.unscale({gb}, a);  // already divided in this step: unchanged, and not a's overflow
  EXPECT_TRUE(scaler.found_inf(a));
  EXPECT_FALSE(scaler.found_inf(b));
  EXPECT_TRUE(at::equal(gb, at::tensor({2.0f})));
  scaler.note_optimizer_step();
  scaler.note_optimizer_step();
  EXPECT_EQ(scaler.current_scale(), 8.0);  // both optimizers divided by the scale of their backward
  // The next backward's loss is scaled after one update: one backoff, not one per optimizer.
  EXPECT_EQ(scaler.scale(at::ones({})).item<double>(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_FALSE(scaler.found_inf());
}

// Two models, two optimizers, one fp16-style scaled backward; model A's gradients overflow. A's step
// is skipped, B's step uses its true gradients (divided by the scale they were multiplied with; an
// update after A's step, as Accelerate does, would divide B's by half of it).
TEST(GradScaler, APreparedOptimizerSkipsOnlyItsOwnOverflowingStep) {
  const char* spec = R"([{"type":"linear","in_features":3,"out_features":2}])";
  torch::manual_seed(7);
  auto model_a = acc::model_from_spec(spec), model_b = acc::model_from_spec(spec);
  acc::Options sgd(acc::optimizer_option_schema());
  sgd.set("lr", 1.0);
  auto state = std::make_shared<acc::GradientState>(1);
  auto scaler = std::make_shared<acc::GradScaler>(acc::GradScalerOptions{1024.0, 2.0, 0.5, 2000}, c10::Device(c10::kCPU));
  acc::AcceleratedOptimizer opt_a(std::make_shared<acc::TorchOptimizer>(model_a, "sgd", sgd), state, scaler);
  acc::AcceleratedOptimizer opt_b(std::make_shared<acc::TorchOptimizer>(model_b, "sgd", sgd), state, scaler);
  const at::Tensor x = at::rand({4, 3});
  auto output = [&x](acc::Model& m) { return m.forward({x}).front().second.sum(); };

  // B's true gradient, from an unscaled backward.
  output(*model_b).backward();
  const at::Tensor b_weight = model_b->named_parameters().front().second.detach().clone();
  const at::Tensor b_grad = model_b->gradients().front().clone();
  opt_b.unwrap()->zero_grad();

  scaler->scale(output(*model_a) + output(*model_b)).backward();
  model_a->gradients().front()[0][0] = std::numeric_limits<float>::infinity();
  const at::Tensor a_weight = model_a->named_parameters().front().second.detach().clone();
  opt_a.step();
  opt_b.step();
  EXPECT_TRUE(opt_a.step_was_skipped());
  EXPECT_FALSE(opt_b.step_was_skipped());
  EXPECT_TRUE(at::equal(model_a->named_parameters().front().second, a_weight));
  EXPECT_TRUE(at::allclose(model_b->named_parameters().front().second, b_weight - b_grad, 0, 1e-6));
  EXPECT_EQ(scaler->scale(at::ones({})).item<double>(), 512.0);  // one backoff for the step
}

namespace {

// DeepSpeed's DynamicLossScaler.update_scale as DeepSpeed states it (an iteration counter, the last
// overflow's iteration, growth when their distance is a multiple of the window): the oracle for
// our tracker-based form.
struct DeepSpeedScaler {
  double scale;
  int64_t window, delayed_shift, hysteresis;
  bool consecutive;
  double min_scale;
  int64_t iter = 0, last_overflow = -1;
  // Returns false where DeepSpeed raises ("already at minimum").
  bool update(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || hysteresis == 1) {
        if (scale == min_scale) return false;
        scale = std::max(scale / 2, min_scale);
      } else {
        --hysteresis;
      }
      last_overflow = iter;
    } else {
      if (consecutive) hysteresis = delayed_shift;
      if ((iter - last_overflow) % window == 0) {
        if (!consecutive) hysteresis = delayed_shift;
        scale *= 2;
      }
    }
    ++iter;
    return true;
  }
};

}  // namespace

TEST(GradScaler, WithHysteresisAndAMinimumItIsDeepSpeedsScaler) {
  for (const bool consecutive : {false, true}) {
    SCOPED_TRACE(consecutive ? "consecutive_hysteresis" : "hysteresis restored by growth");
    const double min_scale = 1.0 / 1024;
    acc::GradScalerOptions options{/*init_scale=*/1024.0, 2.0, 0.5, /*growth_interval=*/4};
    options.hysteresis = 3;
    options.consecutive_hysteresis = consecutive;
    options.min_scale = min_scale;
    acc::GradScaler scaler(options, c10::Device(c10::kCPU));
    DeepSpeedScaler oracle{1024.0, 4, 3, 3, consecutive, min_scale};
    bool ended = false;
    // Bursts of overflows between runs of good steps, long enough to grow and to reach the minimum.
    uint32_t state = 12345;
    int64_t overflows = 0, growths = 0;
    for (int step = 0; step < 400; ++step) {
      state = state * 1103515245u + 12345u;
      const bool overflow = (state >> 16) % 7 < (step % 60 < 30 ? 3u : 1u);
      const double before = scaler.current_scale();
      at::Tensor grad = at::tensor({overflow ? std::numeric_limits<float>::infinity() : 1.0f});
      scaler.unscale({grad});
      ASSERT_EQ(scaler.found_inf(), overflow);
      bool refused = false;
      try {
        scaler.check_can_back_off(overflow);
      } catch (const std::exception& e) {
        refused = true;
        EXPECT_NE(std::string(e.what()).find("already at its minimum"), std::string::npos) << e.what();
      }
      ASSERT_EQ(refused, !oracle.update(overflow)) << "step " << step;
      ended = refused;
      if (refused) break;  // where DeepSpeed ends the run
      scaler.update();
      ASSERT_EQ(scaler.current_scale(), oracle.scale) << "step " << step;
      ASSERT_EQ(scaler.hysteresis_left(), oracle.hysteresis) << "step " << step;
      overflows += overflow;
      growths += scaler.current_scale() > before;
    }
    EXPECT_GT(overflows, 50);
    EXPECT_GT(growths, 20);
    // Resetting hysteresis on every good step keeps this pattern off the minimum; without, it ends.
    EXPECT_EQ(ended, !consecutive);
  }
  // At the minimum: an overflow with hysteresis left only uses it up; without, the run ends.
  acc::GradScalerOptions options{/*init_scale=*/2.0, 2.0, 0.5, 4};
  options.hysteresis = 2;
  options.min_scale = 2.0;
  acc::GradScaler scaler(options, c10::Device(c10::kCPU));
  scaler.check_can_back_off(true);
  scaler.unscale({at::tensor({std::numeric_limits<float>::infinity()})});
  scaler.update();
  EXPECT_EQ(scaler.hysteresis_left(), 1);
  EXPECT_EQ(scaler.current_scale(), 2.0);
  scaler.check_can_back_off(false);
  EXPECT_THROW(scaler.check_can_back_off(true), std::exception);
}

// torch's _amp_update_scale_ multiplies in double and rounds once, and keeps a scale whose growth
// would overflow float; a float32 multiply rounds the factor first, and an infinite scale would
// skip every step after it.
TEST(GradScaler, GrowthAndBackoffRoundAsTorchAndNeverReachInfinity) {
  acc::GradScaler odd({1e9, /*growth=*/3.3, /*backoff=*/0.37, /*growth_interval=*/1}, c10::Device(c10::kCPU));
  float expected = 1e9f;
  for (int step = 0; step < 6; ++step) {
    const bool overflow = step % 3 == 2;
    odd.unscale({at::tensor({overflow ? std::numeric_limits<float>::infinity() : 1.0f})});
    odd.update();
    expected = static_cast<float>(static_cast<double>(expected) * (overflow ? 0.37 : 3.3));
    EXPECT_EQ(odd.current_scale(), static_cast<double>(expected)) << "update " << step;
  }

  acc::GradScaler near_max({std::ldexp(1.0, 126), 2.0, 0.5, /*growth_interval=*/1}, c10::Device(c10::kCPU));
  for (int step = 0; step < 4; ++step) {
    at::Tensor grad = at::tensor({1e-3f});
    near_max.unscale({grad});
    EXPECT_FALSE(near_max.found_inf()) << "update " << step;
    near_max.update();
    EXPECT_EQ(near_max.current_scale(), std::ldexp(1.0, 127)) << "update " << step;
  }
}

// torch's GradScaler.load_state_dict restores the saved growth and backoff rules: a run saved with
// growth_interval 4 and resumed with the default 2000 grows as the saved one would have.
TEST(GradScaler, ACheckpointBringsBackTheScalersRules) {
  const auto path = (std::filesystem::temp_directory_path() / "acc_scaler_rules.json").string();
  auto saved = std::make_shared<acc::GradScaler>(acc::GradScalerOptions{1024.0, 4.0, 0.25, 4}, c10::Device(c10::kCPU));
  for (int step = 0; step < 3; ++step) {  // three good steps: the tracker at 3 of 4
    saved->unscale({at::tensor({1.0f})});
    saved->update();
  }
  acc::scaler_part(saved)->save(path);

  auto resumed = std::make_shared<acc::GradScaler>(acc::GradScalerOptions{}, c10::Device(c10::kCPU));
  acc::scaler_part(resumed)->load(path).apply();
  EXPECT_EQ(resumed->growth_tracker(), 3);
  EXPECT_EQ(resumed->options().growth_interval, 4);
  resumed->unscale({at::tensor({1.0f})});
  resumed->update();  // the fourth good step grows by the saved factor 4
  EXPECT_EQ(resumed->current_scale(), 4096.0);
  resumed->unscale({at::tensor({std::numeric_limits<float>::infinity()})});
  resumed->update();  // and an overflow backs off by the saved 0.25
  EXPECT_EQ(resumed->current_scale(), 1024.0);

  // A file written before the rules were kept leaves the options' rules.
  std::ofstream(path) << R"({"scale": 512.0, "growth_tracker": 1})";
  auto older = std::make_shared<acc::GradScaler>(acc::GradScalerOptions{8.0, 2.0, 0.5, 3}, c10::Device(c10::kCPU));
  acc::scaler_part(older)->load(path).apply();
  EXPECT_EQ(older->options().growth_interval, 3);
  EXPECT_EQ(older->current_scale(), 512.0);
  // Rules no scaler could be made with are refused, naming them.
  std::ofstream(path) << R"({"scale": 512.0, "growth_tracker": 0, "growth_factor": 0.5, "backoff_factor": 0.5,
                             "growth_interval": 3})";
  EXPECT_THROW(acc::scaler_part(older)->load(path), std::exception);
  EXPECT_EQ(older->options().growth_factor, 2.0);
  std::filesystem::remove(path);
}

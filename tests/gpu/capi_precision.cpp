// Mixed precision on a GPU through the C API: bf16 and fp16 autocast in a training step, and the
// fp16 GradScaler on a real overflow.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_support.h"

using acc_gpu::device_of;
using acc_gpu::dtype_of;
using acc_gpu::parameter;
using acc_test::make_accelerator;
using acc_test::to_floats;

namespace {

const char* const kClassifier = R"([{"type":"linear","in_features":16,"out_features":32},{"type":"relu"},
                                    {"type":"linear","in_features":32,"out_features":4}])";

// 64 samples of 16 features in [-1, 1); the label is the largest of the first 4 features (a rule a
// linear layer can learn).
void classification_data(std::vector<float>& x, std::vector<int64_t>& y) {
  x = acc_gpu::uniform(64 * 16, 7);
  y.clear();
  for (int i = 0; i < 64; ++i) {
    int best = 0;
    for (int f = 1; f < 4; ++f)
      if (x[i * 16 + f] > x[i * 16 + best]) best = f;
    y.push_back(best);
  }
}

// Whether every value of a float32 tensor is exactly representable in `dtype`: what a computation
// in bf16 or fp16 gives once converted to fp32 (an fp32 computation essentially never is).
bool on_grid(const acc_tensor* t, acc_dtype dtype) {
  acc_tensor* low = acc_gpu::to(t, nullptr, dtype);
  acc_tensor* back = acc_gpu::to(low, nullptr, ACC_DTYPE_FLOAT32);
  const bool same = to_floats(t) == to_floats(back);
  acc_tensor_free(low);
  acc_tensor_free(back);
  return same;
}

// Trains kClassifier on the GPU under mixed_precision `mode`, checking the dtypes of each piece.
void train_with_autocast(const char* mode, acc_dtype low_dtype) {
  acc_accelerator* acc = make_accelerator({{"mixed_precision", mode}});
  ASSERT_NE(acc, nullptr);
  const std::string device = device_of(acc);
  ASSERT_EQ(device.rfind("cuda", 0), 0u) << "the accelerator runs on " << device;
  const char* mp = nullptr;
  ACC_ASSERT_OK(acc_accelerator_mixed_precision(acc, &mp));
  EXPECT_STREQ(mp, mode);

  ACC_ASSERT_OK(acc_set_seed(3));
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kClassifier, &model));
  acc_options* oo = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  ACC_ASSERT_OK(acc_options_set_double(oo, "lr", 1e-2));
  ACC_ASSERT_OK(acc_optimizer_create(model, "adam", oo, &opt));
  acc_options_free(oo);
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));

  std::vector<float> xv;
  std::vector<int64_t> yv;
  classification_data(xv, yv);
  acc_tensor* x = acc_gpu::floats_on(xv, {64, 16}, device);
  acc_tensor* y = acc_gpu::longs_on(yv, {64}, device);

  // The unwrapped module under the accelerator's autocast computes in the low dtype on the GPU...
  acc_model* raw = nullptr;
  ACC_ASSERT_OK(acc_unwrap_model(acc, model, &raw));
  acc_tensor *low = nullptr, *full = nullptr, *prepared = nullptr;
  ACC_ASSERT_OK(acc_autocast_begin(acc, 1));
  const acc_status autocast_forward = acc_model_forward1(raw, x, ACC_FORWARD_NO_GRAD, &low);
  ACC_ASSERT_OK(acc_autocast_end(acc));
  ACC_ASSERT_OK(autocast_forward);
  EXPECT_EQ(dtype_of(low), low_dtype) << "the model's output under " << mode << " autocast";
  EXPECT_EQ(device_of(low), device);
  // ... and in fp32 without it.
  ACC_ASSERT_OK(acc_model_forward1(raw, x, ACC_FORWARD_NO_GRAD, &full));
  EXPECT_EQ(dtype_of(full), ACC_DTYPE_FLOAT32);
  // The prepared model runs under autocast and hands back fp32 (Accelerate's convert_outputs_to_fp32):
  // values of the low dtype, close to the fp32 computation but not equal to it.
  ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &prepared));
  EXPECT_EQ(dtype_of(prepared), ACC_DTYPE_FLOAT32);
  EXPECT_TRUE(on_grid(prepared, low_dtype)) << "the prepared model's outputs were not computed in " << mode;
  {
    const auto p = to_floats(prepared), f = to_floats(full);
    ASSERT_EQ(p.size(), f.size());
    double largest_difference = 0;
    for (size_t i = 0; i < p.size(); ++i) largest_difference = std::max(largest_difference, double(std::fabs(p[i] - f[i])));
    std::printf("%s: the prepared outputs differ from fp32 ones by up to %.3g\n", mode,
                largest_difference);
    EXPECT_GT(largest_difference, 0.0) << "the prepared model computed in fp32, not under autocast";
    EXPECT_LT(largest_difference, 0.05) << "the " << mode << " outputs are far from the fp32 ones";
  }
  for (acc_tensor* t : {low, full, prepared}) acc_tensor_free(t);

  // Training steps: fp32 outputs and fp32 master weights and gradients; the loss goes down.
  std::vector<double> losses;
  int skipped = 0;
  for (int step = 0; step < 40; ++step) {
    acc_tensor *logits = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    ASSERT_EQ(dtype_of(logits), ACC_DTYPE_FLOAT32);
    EXPECT_TRUE(on_grid(logits, low_dtype)) << "step " << step << ": the training forward did not run in " << mode;
    ACC_ASSERT_OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    losses.push_back(acc_test::item(loss));
    ACC_ASSERT_OK(acc_backward(acc, loss));
    if (step == 0) {
      acc_tensor *w = nullptr, *g = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(model, "0.weight", &w));
      ACC_ASSERT_OK(acc_tensor_grad(w, &g));
      ASSERT_NE(g, nullptr) << "no gradient after acc_backward";
      EXPECT_EQ(dtype_of(g), ACC_DTYPE_FLOAT32) << "the master gradient";
      EXPECT_EQ(device_of(g), device);
      acc_tensor_free(g);
      acc_tensor_free(w);
    }
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    int was_skipped = 0;
    ACC_ASSERT_OK(acc_accelerator_optimizer_step_was_skipped(acc, &was_skipped));
    skipped += was_skipped;
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(logits);
    acc_tensor_free(loss);
  }
  for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    acc_tensor* w = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(model, name, &w));
    EXPECT_EQ(dtype_of(w), ACC_DTYPE_FLOAT32) << name << ": master weights stay fp32";
    EXPECT_EQ(device_of(w), device) << name;
    acc_tensor_free(w);
  }
  std::printf("%s: loss %.4f -> %.4f over %zu steps, %d skipped\n", mode, losses.front(), losses.back(),
              losses.size(), skipped);
  for (double l : losses) ASSERT_TRUE(std::isfinite(l)) << "a loss is not finite";
  EXPECT_LT(losses.back(), 0.6 * losses.front()) << "the loss did not go down";
  if (low_dtype == ACC_DTYPE_BFLOAT16) EXPECT_EQ(skipped, 0) << "bf16 has no loss scaling: no step is skipped";
  else EXPECT_LT(skipped, 10) << "too many fp16 steps skipped for a small, well-scaled loss";

  for (acc_tensor* t : {x, y}) acc_tensor_free(t);
  acc_model_free(raw);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

// The GradScaler's scale and growth tracker, as acc_save_state writes them (scaler.json).
std::pair<double, int64_t> saved_scaler_state(acc_accelerator* acc, const std::string& dir) {
  EXPECT_EQ(acc_save_state(acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  std::ifstream in(dir + "/scaler.json");
  EXPECT_TRUE(in.good()) << dir << "/scaler.json is missing";
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("scale") || !j.contains("growth_tracker")) {
    ADD_FAILURE() << dir << "/scaler.json is not {scale, growth_tracker}";
    return {-1, -1};
  }
  return {j["scale"].get<double>(), j["growth_tracker"].get<int64_t>()};
}

}  // namespace

TEST(GpuAutocast, Bf16TrainingStepComputesInBf16WithFp32MasterWeights) {
  ACC_REQUIRE_CUDA();
  train_with_autocast("bf16", ACC_DTYPE_BFLOAT16);
}

TEST(GpuAutocast, Fp16TrainingStepComputesInFp16WithFp32MasterWeights) {
  ACC_REQUIRE_CUDA();
  train_with_autocast("fp16", ACC_DTYPE_FLOAT16);
}

namespace {

// A linear model trained with SGD under fp16 on CUDA, with targets that keep its fp16 gradients
// finite (`small`) or make them overflow (`huge`).
struct Fp16Job {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *small = nullptr, *huge = nullptr;

  explicit Fp16Job(std::vector<std::pair<std::string, std::string>> options) {
    options.emplace_back("mixed_precision", "fp16");
    acc = make_accelerator(options);
    EXPECT_NE(acc, nullptr);
    if (!acc) return;
    const std::string device = device_of(acc);
    EXPECT_EQ(device.rfind("cuda", 0), 0u) << device;
    EXPECT_EQ(acc_set_seed(1), ACC_OK);
    EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":4,"out_features":2}])", &model), ACC_OK);
    acc_options* oo = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo), ACC_OK);
    EXPECT_EQ(acc_options_set_double(oo, "lr", 0.1), ACC_OK);
    EXPECT_EQ(acc_optimizer_create(model, "sgd", oo, &opt), ACC_OK);
    acc_options_free(oo);
    EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    x = acc_gpu::floats_on(acc_gpu::uniform(8 * 4, 11), {8, 4}, device);
    small = acc_gpu::floats_on(acc_gpu::uniform(8 * 2, 12), {8, 2}, device);
    // MSE against 30000: d(loss)/d(output) * 1024 is about 4e6, past fp16's 65504, so the fp16
    // output's gradient is inf (the forward and the fp32 loss stay finite).
    huge = acc_gpu::floats_on(std::vector<float>(16, 30000.0f), {8, 2}, device);
  }
  ~Fp16Job() {
    for (acc_tensor* t : {x, small, huge}) acc_tensor_free(t);
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  Fp16Job(const Fp16Job&) = delete;
  Fp16Job& operator=(const Fp16Job&) = delete;

  // One step towards `y`: whether the optimizer step was skipped (-1 where the step failed).
  int step(const acc_tensor* y) {
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK) << acc_last_error_message();
    EXPECT_TRUE(std::isfinite(acc_test::item(loss))) << "the loss itself must stay finite";
    EXPECT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
    int skipped = -1;
    if (acc_optimizer_step(opt) == ACC_OK) EXPECT_EQ(acc_accelerator_optimizer_step_was_skipped(acc, &skipped), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
    return skipped;
  }
  std::vector<float> weights() const {
    auto w = parameter(model, "0.weight"), b = parameter(model, "0.bias");
    w.insert(w.end(), b.begin(), b.end());
    return w;
  }
};

}  // namespace

TEST(GpuGradScaler, AnFp16OverflowSkipsTheStepKeepsTheWeightsAndHalvesTheScale) {
  ACC_REQUIRE_CUDA();
  const std::string work = acc_gpu::work_dir("grad_scaler_overflow");
  Fp16Job job({{"scaler_init_scale", "1024"}});
  ASSERT_NE(job.acc, nullptr);

  const auto w0 = job.weights();
  EXPECT_EQ(job.step(job.small), 0) << "a normal step";
  const auto w1 = job.weights();
  EXPECT_NE(w1, w0) << "the normal step changed nothing";
  auto state = saved_scaler_state(job.acc, work + "/after_normal_step");
  EXPECT_EQ(state.first, 1024.0);
  EXPECT_EQ(state.second, 1);

  EXPECT_EQ(job.step(job.huge), 1) << "the step whose fp16 gradients overflowed was not skipped";
  const auto w2 = job.weights();
  EXPECT_EQ(w2, w1) << "a skipped step changed the weights";
  for (float v : w2) EXPECT_TRUE(std::isfinite(v));
  state = saved_scaler_state(job.acc, work + "/after_overflow");
  EXPECT_EQ(state.first, 512.0) << "the scale backs off by scaler_backoff_factor 0.5";
  EXPECT_EQ(state.second, 0);

  EXPECT_EQ(job.step(job.small), 0) << "the step after an overflow is a normal one again";
  const auto w3 = job.weights();
  EXPECT_NE(w3, w2);
  for (float v : w3) EXPECT_TRUE(std::isfinite(v));
  state = saved_scaler_state(job.acc, work + "/after_recovery");
  EXPECT_EQ(state.first, 512.0);
  EXPECT_EQ(state.second, 1);
}

// GradScalerKwargs(enabled=False): fp16 autocast without loss scaling. The step that overflowed
// with a scale of 1024 is an ordinary one, and no scale is saved.
TEST(GpuGradScaler, ADisabledScalerScalesNothingAndSkipsNothing) {
  ACC_REQUIRE_CUDA();
  const std::string work = acc_gpu::work_dir("grad_scaler_disabled");
  Fp16Job job({{"scaler_enabled", "false"}});
  ASSERT_NE(job.acc, nullptr);
  const auto w0 = job.weights();
  EXPECT_EQ(job.step(job.huge), 0) << "unscaled, the fp16 gradients stay finite";
  const auto w1 = job.weights();
  EXPECT_NE(w1, w0);
  for (float v : w1) EXPECT_TRUE(std::isfinite(v));
  ASSERT_EQ(acc_save_state(job.acc, (work + "/state").c_str(), nullptr), ACC_OK) << acc_last_error_message();
  EXPECT_FALSE(std::ifstream(work + "/state/scaler.json").good()) << "a disabled scaler saved a scale";
}

// DeepSpeed's loss scaler (hysteresis 2, minimum 512): the first overflow is skipped with the scale
// kept, the second backs it off to the minimum, a third at the minimum fails the step.
TEST(GpuGradScaler, DeepSpeedsHysteresisAndMinimumOnCuda) {
  ACC_REQUIRE_CUDA();
  Fp16Job job({{"scaler_init_scale", "1024"}, {"scaler_hysteresis", "2"}, {"scaler_min_scale", "512"}});
  ASSERT_NE(job.acc, nullptr);
  const std::string work = acc_gpu::work_dir("deepspeed_scaler");
  const auto w0 = job.weights();
  EXPECT_EQ(job.step(job.huge), 1);
  EXPECT_EQ(job.weights(), w0);
  EXPECT_EQ(saved_scaler_state(job.acc, work + "/first").first, 1024.0) << "hysteresis: the scale is kept";
  EXPECT_EQ(job.step(job.huge), 1);
  EXPECT_EQ(saved_scaler_state(job.acc, work + "/second").first, 512.0);
  EXPECT_EQ(job.step(job.huge), -1) << "an overflow at the minimum scale fails the step";
  EXPECT_NE(std::string(acc_last_error_message()).find("already at its minimum"), std::string::npos)
      << acc_last_error_message();
  EXPECT_EQ(job.weights(), w0);
}

// Mixed precision and the training-step semantics around it on one process: bf16 trains as well as
// fp32, the autocast scope for code outside a prepared model, unscale_gradients, accumulation equal
// to one large batch, and user learning-rate schedules.
#include <cmath>
#include <functional>
#include <thread>

#include "support.h"

using acc_test::floats;
using acc_test::longs;
using acc_test::to_floats;

namespace {

// Three Gaussian-ish blobs in 4 dimensions, 50 samples each, from a fixed formula.
struct Blobs {
  std::vector<float> x;
  std::vector<int64_t> y;
  Blobs() {
    for (int64_t i = 0; i < 150; ++i) {
      const int64_t c = i % 3;
      for (int f = 0; f < 4; ++f)
        x.push_back(static_cast<float>((f == c ? 2.0 : 0.0) + 0.6 * std::sin(1.7 * static_cast<double>(i * 4 + f))));
      y.push_back(c);
    }
  }
};

const char* kClassifier = R"([{"type":"linear","in_features":4,"out_features":32},{"type":"relu"},
                              {"type":"linear","in_features":32,"out_features":3}])";

// Full-batch training of the classifier under a mixed_precision mode; returns the accuracy.
double train_accuracy(const char* mixed_precision) {
  EXPECT_EQ(acc_set_seed(3), ACC_OK);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", mixed_precision}});
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(kClassifier, &model), ACC_OK);
  acc_options* oo = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo), ACC_OK);
  EXPECT_EQ(acc_options_set_double(oo, "lr", 0.05), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(model, "adam", oo, &opt), ACC_OK);
  acc_options_free(oo);
  EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  Blobs blobs;
  acc_tensor* x = floats(blobs.x, {150, 4});
  acc_tensor* y = longs(blobs.y, {150});
  for (int epoch = 0; epoch < 60; ++epoch) {
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK);
    EXPECT_EQ(acc_loss_cross_entropy(out, y, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
    EXPECT_EQ(acc_backward(acc, loss), ACC_OK);
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  acc_tensor *out = nullptr, *predicted = nullptr;
  EXPECT_EQ(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &out), ACC_OK);
  EXPECT_EQ(acc_tensor_argmax(out, 1, 0, &predicted), ACC_OK);
  int64_t correct = 0;
  EXPECT_EQ(acc_tensor_count_equal(predicted, y, &correct), ACC_OK);
  for (acc_tensor* t : {x, y, out, predicted}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
  return static_cast<double>(correct) / 150.0;
}

acc_dtype output_dtype(acc_model* model, acc_tensor* x) {
  acc_tensor* out = nullptr;
  EXPECT_EQ(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &out), ACC_OK) << acc_last_error_message();
  acc_dtype dtype = ACC_DTYPE_FLOAT32;
  EXPECT_EQ(acc_tensor_dtype(out, &dtype), ACC_OK);
  acc_tensor_free(out);
  return dtype;
}

}  // namespace

TEST(MixedPrecision, Bf16TrainsAsWellAsFp32) {
  const double fp32 = train_accuracy("no"), bf16 = train_accuracy("bf16");
  EXPECT_GT(fp32, 0.95);
  EXPECT_GT(bf16, 0.95);
  EXPECT_NEAR(bf16, fp32, 0.03);
}

TEST(MixedPrecision, Fp16OnTheCpuIsUnsupportedWithAReason) {
  acc_accelerator* acc = nullptr;
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"cpu", "1"}, {"mixed_precision", "fp16"}}, &acc),
                   ACC_ERR_UNSUPPORTED, "bf16");
  // Without loss scaling (GradScalerKwargs(enabled=False)) too: CPU autocast has no fp16.
  ACC_EXPECT_ERROR(
      acc_test::create_accelerator({{"cpu", "1"}, {"mixed_precision", "fp16"}, {"scaler_enabled", "false"}}, &acc),
      ACC_ERR_UNSUPPORTED, "bf16");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "scaler_enabled", "sometimes"), ACC_ERR_INVALID_ARGUMENT, "scaler_enabled");
  acc_options_free(o);
}

TEST(Autocast, ScopesApplyToCodeOutsideThePreparedModelAndNest) {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  acc_model* raw = nullptr;  // not prepared: only the scope decides its precision
  ACC_ASSERT_OK(acc_model_from_spec(kClassifier, &raw));
  acc_tensor* x = floats(std::vector<float>(8, 0.5f), {2, 4});
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_FLOAT32);
  ACC_ASSERT_OK(acc_autocast_begin(acc, 1));
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_BFLOAT16);
  ACC_ASSERT_OK(acc_autocast_begin(acc, 0));  // AutocastKwargs(enabled=False)
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_FLOAT32);
  ACC_ASSERT_OK(acc_autocast_end(acc));
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_BFLOAT16);
  ACC_ASSERT_OK(acc_autocast_end(acc));
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_FLOAT32);  // nothing leaks out of the scope
  ACC_EXPECT_ERROR(acc_autocast_end(acc), ACC_ERR_INVALID_ARGUMENT, "without an autocast_begin");
  acc_tensor_free(x);
  acc_model_free(raw);
  acc_accelerator_free(acc);
}

// A thread that ends (an error path) with its scope still open leaves nothing behind that runs after
// torch's own thread state is gone: threads come and go and the process goes on.
TEST(Autocast, AScopeLeftOpenWhenItsThreadEndsDiesWithTheThread) {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  acc_model* raw = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kClassifier, &raw));
  acc_tensor* x = floats(std::vector<float>(8, 0.5f), {2, 4});
  for (int i = 0; i < 20; ++i)
    std::thread([&] {
      ASSERT_EQ(acc_autocast_begin(acc, 1), ACC_OK);
      EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_BFLOAT16);
    }).join();
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_FLOAT32);  // this thread never was under the scope
  acc_tensor_free(x);
  acc_model_free(raw);
  acc_accelerator_free(acc);
}

TEST(Autocast, WithoutMixedPrecisionTheScopeComputesInFp32) {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  acc_model* raw = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kClassifier, &raw));
  acc_tensor* x = floats(std::vector<float>(4, 1.0f), {1, 4});
  ACC_ASSERT_OK(acc_autocast_begin(acc, 1));
  EXPECT_EQ(output_dtype(raw, x), ACC_DTYPE_FLOAT32);
  ACC_ASSERT_OK(acc_autocast_end(acc));
  acc_tensor_free(x);
  acc_model_free(raw);
  acc_accelerator_free(acc);
}

TEST(UnscaleGradients, WithoutFp16GradientsStayAsTheyAre) {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  acc_tensor* x = floats({1, 2}, {1, 2});
  acc_tensor *out = nullptr, *loss = nullptr, *w = nullptr, *grad = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(model, x, 0, &out));
  ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
  ACC_ASSERT_OK(acc_backward(acc, loss));
  ACC_ASSERT_OK(acc_unscale_gradients(acc, opt));
  ACC_ASSERT_OK(acc_unscale_gradients(acc, nullptr));
  ACC_ASSERT_OK(acc_model_parameter(model, "0.weight", &w));
  ACC_ASSERT_OK(acc_tensor_grad(w, &grad));
  EXPECT_EQ(to_floats(grad), (std::vector<float>{1, 2}));  // d(sum(w.x + b))/dw = x
  for (acc_tensor* t : {x, out, loss, w, grad}) acc_tensor_free(t);
  ACC_EXPECT_ERROR(acc_unscale_gradients(nullptr, opt), ACC_ERR_INVALID_HANDLE, "acc");
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

namespace {

// One micro-step of an accumulation window on (x, y) with an MSE loss; `at_window_end` runs after
// the backward of a micro-step that ends a window (where the optimizer really steps).
void micro_step(acc_accelerator* acc, acc_model* model, acc_optimizer* opt, acc_tensor* x, acc_tensor* y,
                const std::function<void()>& at_window_end = {}) {
  acc_tensor *out = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_accumulate_begin(acc), ACC_OK);
  EXPECT_EQ(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out), ACC_OK);
  EXPECT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  EXPECT_EQ(acc_backward(acc, loss), ACC_OK);
  int sync = 0;
  EXPECT_EQ(acc_accelerator_sync_gradients(acc, &sync), ACC_OK);
  if (sync && at_window_end) at_window_end();
  EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
  EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
  EXPECT_EQ(acc_accumulate_end(acc), ACC_OK);
  acc_tensor_free(out);
  acc_tensor_free(loss);
}

std::vector<float> parameter_values(const acc_model* model, const char* name) {
  acc_tensor* w = nullptr;
  EXPECT_EQ(acc_model_parameter(model, name, &w), ACC_OK);
  auto values = w ? to_floats(w) : std::vector<float>{};
  acc_tensor_free(w);
  return values;
}

// Trains a linear model with SGD through the accelerator; every call of `step` is one micro-step on
// rows [first, first + rows) of a fixed data set. Returns the weights.
std::vector<float> accumulate_and_step(int64_t accumulation, int64_t rows_per_micro_step) {
  EXPECT_EQ(acc_set_seed(1), ACC_OK);
  acc_accelerator* acc =
      acc_test::make_accelerator({{"cpu", "1"}, {"gradient_accumulation_steps", std::to_string(accumulation)}});
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model), ACC_OK);
  acc_options* oo = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo), ACC_OK);
  EXPECT_EQ(acc_options_set_double(oo, "lr", 0.1), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(model, "sgd", oo, &opt), ACC_OK);
  acc_options_free(oo);
  EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK);
  for (int64_t first = 0; first < 16; first += rows_per_micro_step) {
    std::vector<float> x, y;
    for (int64_t r = first; r < first + rows_per_micro_step; ++r) {
      for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.9f * static_cast<float>(r * 3 + f)));
      for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.4f * static_cast<float>(r + f)));
    }
    acc_tensor* xt = floats(x, {rows_per_micro_step, 3});
    acc_tensor* yt = floats(y, {rows_per_micro_step, 2});
    micro_step(acc, model, opt, xt, yt);
    acc_tensor_free(xt);
    acc_tensor_free(yt);
  }
  auto weights = parameter_values(model, "0.weight");
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
  return weights;
}

}  // namespace

TEST(Accumulation, KMicroStepsEqualOneStepOnTheKTimesBatch) {
  for (int64_t k : {2, 4}) {
    const auto accumulated = accumulate_and_step(k, 8 / k);  // 16 rows: windows of k micro-steps of 8/k rows
    const auto whole = accumulate_and_step(1, 8);                // 2 steps of 8 rows
    ASSERT_EQ(accumulated.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(accumulated[i], whole[i], 1e-6) << "k=" << k << " i=" << i;
  }
}

namespace {

struct Schedule {
  std::vector<int64_t> asked;
  bool fail_at_3 = false;
  static int lambda(void* self, int64_t step, double* factor) {
    auto* s = static_cast<Schedule*>(self);
    s->asked.push_back(step);
    if (s->fail_at_3 && step == 3) {
      acc_callback_set_error("no schedule past step 2");
      return 7;
    }
    *factor = step == 5 ? std::nan("") : 1.0 - static_cast<double>(step) / 10.0;
    return 0;
  }
};

double lr_of(acc_optimizer* opt) {
  double lr = 0;
  EXPECT_EQ(acc_optimizer_get_lr(opt, 0, &lr), ACC_OK);
  return lr;
}

}  // namespace

TEST(Scheduler, UserLambdaSetsTheRateAndItsFailuresChangeNothing) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &model));
  acc_options* oo = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  ACC_ASSERT_OK(acc_options_set_double(oo, "lr", 1.0));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", oo, &opt));
  acc_options_free(oo);
  Schedule schedule;
  schedule.fail_at_3 = true;
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create_lambda(opt, Schedule::lambda, &schedule, nullptr, &sched));
  EXPECT_DOUBLE_EQ(lr_of(opt), 1.0);
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  EXPECT_DOUBLE_EQ(lr_of(opt), 0.8);
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_IO, "no schedule past step 2");
  EXPECT_DOUBLE_EQ(lr_of(opt), 0.8);
  int64_t step = 0;
  ACC_ASSERT_OK(acc_scheduler_get_step(sched, &step));
  EXPECT_EQ(step, 2);
  schedule.fail_at_3 = false;
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "must be finite");  // NaN at step 5
  EXPECT_DOUBLE_EQ(lr_of(opt), 0.6);
  EXPECT_EQ(schedule.asked, (std::vector<int64_t>{0, 1, 2, 3, 3, 4, 5}));
  ACC_EXPECT_ERROR(acc_scheduler_create_lambda(opt, nullptr, nullptr, nullptr, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "lambda");
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

namespace {

int freed = 0;
void count_free(void*) { ++freed; }
int failing_lambda(void*, int64_t, double*) { return 1; }

}  // namespace

TEST(Scheduler, AFailedLambdaCreationReleasesTheUserData) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  freed = 0;
  ACC_EXPECT_ERROR(acc_scheduler_create_lambda(opt, failing_lambda, nullptr, count_free, &sched), ACC_ERR_IO,
                   "lambda at step 0");
  EXPECT_EQ(sched, nullptr);
  EXPECT_EQ(freed, 1);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

namespace {

// One epoch of a prepared loader in accumulation windows (running `inside` first in each step):
// whether each micro-step synchronised.
std::vector<int> syncs_of_epoch(acc_accelerator* acc, acc_dataloader* dl, const std::function<void()>& inside = {}) {
  std::vector<int> syncs;
  for (acc_tensor_list* batch = nullptr; acc_dataloader_next(dl, &batch) == ACC_OK && batch;) {
    if (inside) inside();
    int sync = -1;
    EXPECT_EQ(acc_accumulate_begin(acc), ACC_OK);
    EXPECT_EQ(acc_accelerator_sync_gradients(acc, &sync), ACC_OK);
    syncs.push_back(sync);
    EXPECT_EQ(acc_accumulate_end(acc), ACC_OK);
    acc_tensor_list_free(batch);
  }
  return syncs;
}

}  // namespace

TEST(Accumulation, SyncWithDataloaderOffLetsTheLastWindowRunOn) {
  for (const char* sync_with_dataloader : {"1", "0"}) {
    acc_accelerator* acc = acc_test::make_accelerator(
        {{"cpu", "1"}, {"gradient_accumulation_steps", "2"}, {"sync_with_dataloader", sync_with_dataloader}});
    acc_tensor* x = floats({1, 2, 3, 4, 5}, {5, 1});
    const acc_tensor* fields[] = {x};
    acc_dataset* ds = nullptr;
    ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 1, &ds));
    acc_dataloader* dl = nullptr;
    ACC_ASSERT_OK(acc_dataloader_create(ds, nullptr, &dl));
    ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    EXPECT_EQ(syncs_of_epoch(acc, dl), (std::string(sync_with_dataloader) == "1" ? std::vector<int>{0, 1, 0, 1, 1}
                                                                                 : std::vector<int>{0, 1, 0, 1, 0}));
    acc_dataloader_free(dl);
    acc_dataset_free(ds);
    acc_tensor_free(x);
    acc_accelerator_free(acc);
  }
}

// An evaluation loop run to its end inside a training step (evaluate every k steps) does not take
// the training loader's end of data away: as Accelerate's stack of active loaders, the innermost
// loader being iterated decides, and once the evaluation is done that is the training loader again.
TEST(Accumulation, ALoaderIteratedInsideAnotherLeavesTheOutersEndOfData) {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"gradient_accumulation_steps", "3"}});
  acc_tensor* x = floats({1, 2, 3, 4, 5, 6, 7}, {7, 1});
  const acc_tensor* fields[] = {x};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 1, &ds));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
  acc_dataloader *train = nullptr, *eval = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &train));
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &eval));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &train, nullptr));
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &eval, nullptr));
  // The whole evaluation loader is run inside each training step.
  const auto run_eval = [&] {
    for (acc_tensor_list* e = nullptr; acc_dataloader_next(eval, &e) == ACC_OK && e;) acc_tensor_list_free(e);
  };
  EXPECT_EQ(syncs_of_epoch(acc, train, run_eval),
            (std::vector<int>{0, 0, 1, 1}));  // the last training batch ends the window
  int64_t step = -1;
  ACC_ASSERT_OK(acc_accelerator_step(acc, &step));
  EXPECT_EQ(step, 0);
  for (acc_dataloader* dl : {train, eval}) acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_tensor_free(x);
  acc_accelerator_free(acc);
}

// DeepSpeed's gradient_clipping: a prepared optimizer clips its model's gradients before each step
// it takes, as an acc_clip_grad_norm call just before the step would; micro-steps inside an
// accumulation window (where the step does nothing) clip nothing.
TEST(Clipping, TheGradientClippingOptionClipsBeforeEachStep) {
  enum class Clip { Option, ByHand, None };
  auto train = [](Clip clip) {
    acc_accelerator* acc = acc_test::make_accelerator(
        {{"cpu", "true"}, {"gradient_accumulation_steps", "2"}, {"gradient_clipping", clip == Clip::Option ? "0.05" : "0"}});
    EXPECT_EQ(acc_set_seed(3), ACC_OK);
    acc_model* model = acc_test::spec_model(R"([{"type":"linear","in_features":4,"out_features":3},{"type":"tanh"},
                                                {"type":"linear","in_features":3,"out_features":2}])");
    acc_optimizer* opt = acc_test::optimizer(model, "sgd", 0.5);
    EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    for (int step = 0; step < 6; ++step) {
      std::vector<float> x(8), y(4);
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i + 8 * step));
      for (size_t i = 0; i < y.size(); ++i) y[i] = std::cos(0.3f * static_cast<float>(i + 4 * step));
      acc_tensor *xt = floats(x, {2, 4}), *yt = floats(y, {2, 2});
      micro_step(acc, model, opt, xt, yt, [&] {
        double norm = 0;
        if (clip == Clip::ByHand) EXPECT_EQ(acc_clip_grad_norm(acc, model, 0.05, 2.0, &norm), ACC_OK);
      });
      acc_tensor_free(xt);
      acc_tensor_free(yt);
    }
    const std::vector<float> weights = parameter_values(model, "0.weight");
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
    return weights;
  };
  const auto by_option = train(Clip::Option);
  EXPECT_EQ(by_option, train(Clip::ByHand));
  EXPECT_NE(by_option, train(Clip::None)) << "the norm 0.05 must bind";
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "gradient_clipping", "-1"), ACC_ERR_INVALID_ARGUMENT, "gradient_clipping");
  acc_options_free(o);
}

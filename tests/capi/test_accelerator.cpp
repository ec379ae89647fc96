// The Accelerator on one process: options and environment, properties, prepare, backward and
// gradient accumulation.
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "support.h"

using acc_test::floats;
using acc_test::longs;
using acc_test::to_floats;

namespace {

using EnvVar = acc_test::ScopedEnv;

acc_accelerator* make(std::initializer_list<std::pair<const char*, const char*>> items) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (auto& kv : items) pairs.emplace_back(kv.first, kv.second);
  return acc_test::make_accelerator(pairs);
}

int64_t accumulation_steps(acc_accelerator* a) {
  int64_t v = -1;
  EXPECT_EQ(acc_accelerator_gradient_accumulation_steps(a, &v), ACC_OK);
  return v;
}

std::string precision(acc_accelerator* a) {
  const char* p = nullptr;
  EXPECT_EQ(acc_accelerator_mixed_precision(a, &p), ACC_OK);
  return p;
}

const char* kLinear = R"([{"type":"linear","in_features":2,"out_features":1}])";

}  // namespace

TEST(Accelerator, SingleProcessProperties) {
  acc_accelerator* a = make({{"cpu", "true"}});
  const char* type = nullptr;
  ACC_ASSERT_OK(acc_accelerator_distributed_type(a, &type));
  EXPECT_STREQ(type, "NO");
  int64_t v = -1;
  ACC_ASSERT_OK(acc_accelerator_process_index(a, &v));
  EXPECT_EQ(v, 0);
  ACC_ASSERT_OK(acc_accelerator_num_processes(a, &v));
  EXPECT_EQ(v, 1);
  ACC_ASSERT_OK(acc_accelerator_local_process_index(a, &v));
  EXPECT_EQ(v, 0);
  int flag = 0;
  for (auto fn : {acc_accelerator_is_main_process, acc_accelerator_is_local_main_process,
                  acc_accelerator_is_last_process, acc_accelerator_sync_gradients}) {
    flag = 0;
    ACC_ASSERT_OK(fn(a, &flag));
    EXPECT_EQ(flag, 1);
  }
  ACC_ASSERT_OK(acc_accelerator_optimizer_step_was_skipped(a, &flag));
  EXPECT_EQ(flag, 0);
  char* device = nullptr;
  ACC_ASSERT_OK(acc_accelerator_device(a, &device));
  EXPECT_STREQ(device, "cpu");
  acc_string_free(device);
  EXPECT_EQ(precision(a), "no");
  ACC_ASSERT_OK(acc_accelerator_step(a, &v));
  EXPECT_EQ(v, 0);
  ACC_ASSERT_OK(acc_wait_for_everyone(a));
  acc_accelerator_free(a);
  ACC_EXPECT_ERROR(acc_accelerator_num_processes(a, &v), ACC_ERR_INVALID_HANDLE, "acc_accelerator");
}

TEST(Accelerator, OptionsWinOverEnvironmentWhichWinsOverDefaults) {
  {
    EnvVar ga("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4");
    EnvVar mp("ACCELERATE_MIXED_PRECISION", "bf16");
    EnvVar cpu("ACCELERATE_USE_CPU", "yes");
    acc_accelerator* from_env = make({});
    EXPECT_EQ(accumulation_steps(from_env), 4);
    EXPECT_EQ(precision(from_env), "bf16");
    acc_accelerator_free(from_env);
    acc_accelerator* explicit_ = make({{"gradient_accumulation_steps", "2"}, {"mixed_precision", "no"}});
    EXPECT_EQ(accumulation_steps(explicit_), 2);
    EXPECT_EQ(precision(explicit_), "no");
    acc_accelerator_free(explicit_);
  }
  acc_accelerator* defaults = make({});
  EXPECT_EQ(accumulation_steps(defaults), 1);
  EXPECT_EQ(precision(defaults), "no");
  acc_accelerator_free(defaults);
}

TEST(Accelerator, BadOptionsAndEnvironmentAreNamed) {
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "mixed_precision", "fp8"), ACC_ERR_INVALID_ARGUMENT, "must be one of no, fp16, bf16");
  ACC_EXPECT_ERROR(acc_options_set_int(o, "gradient_accumulation_steps", 0), ACC_ERR_INVALID_ARGUMENT,
                   "gradient_accumulation_steps");
  ACC_EXPECT_ERROR(acc_options_set_bool(o, "use_cpu", 1), ACC_ERR_INVALID_ARGUMENT, "unknown accelerator option 'use_cpu'");
  acc_accelerator* a = nullptr;
  {
    EnvVar ga("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "four");
    ACC_EXPECT_ERROR(acc_accelerator_create(o, &a), ACC_ERR_INVALID_ARGUMENT, "ACCELERATE_GRADIENT_ACCUMULATION_STEPS");
  }
  for (const char* flag : {"ACCELERATE_DEBUG_MODE", "ACCELERATE_CPU_AFFINITY"}) {  // were read as false
    EnvVar bad(flag, "maybe");
    ACC_EXPECT_ERROR(acc_accelerator_create(o, &a), ACC_ERR_INVALID_ARGUMENT,
                     std::string("environment variable ") + flag + "='maybe' must be true or false");
  }
  ACC_ASSERT_OK(acc_options_set(o, "mixed_precision", "fp16"));
  ACC_EXPECT_ERROR(acc_accelerator_create(o, &a), ACC_ERR_UNSUPPORTED, "fp16");
  acc_options_free(o);
  acc_options* wrong_kind = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &wrong_kind));
  ACC_EXPECT_ERROR(acc_accelerator_create(wrong_kind, &a), ACC_ERR_INVALID_ARGUMENT, "accelerator options are needed");
  acc_options_free(wrong_kind);
}

TEST(Prepare, IsIdempotentAndUnwraps) {
  acc_accelerator* a = make({{"cpu", "1"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &model));
  acc_model *p1 = nullptr, *p2 = nullptr, *p3 = nullptr, *raw = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &p1));
  ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &p2));  // same object twice
  ACC_ASSERT_OK(acc_prepare_model(a, p1, ACC_PLACEMENT_DEFAULT, &p3));     // a prepared object
  ACC_ASSERT_OK(acc_unwrap_model(a, p1, &raw));
  // All views share the same parameters: a change through one is seen by the others.
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&state));
  acc_tensor* w = floats({5, 6}, {1, 2});
  ACC_ASSERT_OK(acc_tensor_list_append(state, "0.weight", w));
  ACC_ASSERT_OK(acc_model_load_state_dict(p3, state, 0));
  for (acc_model* m : {model, p1, p2, raw}) {
    acc_tensor* got = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, "0.weight", &got));
    EXPECT_EQ(to_floats(got), (std::vector<float>{5, 6}));
    acc_tensor_free(got);
  }
  ACC_EXPECT_ERROR(acc_prepare_model(a, model, static_cast<acc_placement>(5), &p1), ACC_ERR_INVALID_ARGUMENT,
                   "placement");
  acc_tensor_free(w);
  acc_tensor_list_free(state);
  for (acc_model* m : {model, p1, p2, p3, raw}) acc_model_free(m);
  acc_accelerator_free(a);
}

TEST(Prepare, InPlaceReplacesHandlesAndKeepsTrainingWorking) {
  acc_accelerator* a = make({{"cpu", "1"}, {"seed", "0"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "constant", nullptr, &sched));
  acc_tensor* x = floats({1, 2, 3, 4}, {2, 2});
  acc_tensor* y = longs({0, 1}, {2});
  const acc_tensor* fields[] = {x, y};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 2, &ds));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, nullptr, &dl));
  acc_model* original = model;
  const int64_t live_before = acc_debug_live_handles(ACC_HANDLE_ANY);
  ACC_ASSERT_OK(acc_prepare(a, &model, &opt, &dl, &sched));
  EXPECT_NE(model, original);
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_ANY), live_before);  // each old handle was freed
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
  ASSERT_NE(batch, nullptr);
  acc_tensor_list_free(batch);
  // NULL and missing slots are skipped; a bad handle leaves everything unchanged.
  ACC_ASSERT_OK(acc_prepare(a, nullptr, nullptr, nullptr, nullptr));
  acc_model* bogus = reinterpret_cast<acc_model*>(x);
  ACC_EXPECT_ERROR(acc_prepare(a, &bogus, &opt, nullptr, nullptr), ACC_ERR_INVALID_HANDLE, "*model");
  for (acc_tensor* t : {x, y}) acc_tensor_free(t);
  acc_dataset_free(ds);
  acc_dataloader_free(dl);
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(Backward, DividesTheLossByAccumulationSteps) {
  // loss = sum(w . x) for x = (1, 1): d loss / d w = (1, 1); with 4 accumulation steps, 1/4 each.
  for (int steps : {1, 4}) {
    acc_accelerator* a = make({{"cpu", "1"}, {"gradient_accumulation_steps", std::to_string(steps).c_str()}});
    acc_model* model = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(kLinear, &model));
    acc_model* prepared = nullptr;
    ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &prepared));
    acc_tensor* x = floats({1, 1}, {1, 2});
    acc_tensor *out = nullptr, *loss = nullptr, *w = nullptr, *grad = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(prepared, x, 0, &out));
    ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
    ACC_ASSERT_OK(acc_backward(a, loss));
    ACC_ASSERT_OK(acc_model_parameter(prepared, "0.weight", &w));
    ACC_ASSERT_OK(acc_tensor_grad(w, &grad));
    ASSERT_NE(grad, nullptr);
    EXPECT_EQ(to_floats(grad), (std::vector<float>{1.0f / steps, 1.0f / steps}));
    for (acc_tensor* t : {x, out, loss, w, grad}) acc_tensor_free(t);
    acc_model_free(model);
    acc_model_free(prepared);
    acc_accelerator_free(a);
  }
}

// Accelerate's backward(loss, retain_graph=True): two losses of one forward back-propagate in turn
// and their gradients add up; without it the second one is refused (the graph is freed) and the
// gradients stay as the first left them. create_graph gives gradients with a graph of their own.
TEST(Backward, RetainGraphAndCreateGraphAsTorchs) {
  acc_accelerator* a = make({{"cpu", "1"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &model));
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &prepared));
  acc_tensor* x = floats({1, 2}, {1, 2});
  acc_tensor *w = nullptr, *zero = floats({0}, {1, 1});
  ACC_ASSERT_OK(acc_model_parameter(prepared, "0.weight", &w));
  auto gradient = [&] {
    acc_tensor* grad = nullptr;
    EXPECT_EQ(acc_tensor_grad(w, &grad), ACC_OK);
    std::vector<float> values = grad ? to_floats(grad) : std::vector<float>{};
    acc_tensor_free(grad);
    return values;
  };
  for (int retain : {1, 0}) {
    SCOPED_TRACE(retain ? "retain_graph" : "without retain_graph");
    ACC_ASSERT_OK(acc_model_zero_grad(prepared));
    acc_tensor *out = nullptr, *first = nullptr, *second = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(prepared, x, 0, &out));
    ACC_ASSERT_OK(acc_tensor_sum(out, &first));                           // d/dw = x
    ACC_ASSERT_OK(acc_loss_mse(out, zero, ACC_REDUCTION_MEAN, &second));  // d/dw = 2 out x
    const float y = to_floats(out)[0];
    ACC_ASSERT_OK(acc_backward_ex(a, first, retain, 0));
    EXPECT_EQ(gradient(), (std::vector<float>{1, 2}));
    if (retain) {
      ACC_ASSERT_OK(acc_backward(a, second));
      const auto g = gradient();
      ASSERT_EQ(g.size(), 2u);
      EXPECT_NEAR(g[0], 1 + 2 * y * 1, 1e-5);
      EXPECT_NEAR(g[1], 2 + 2 * y * 2, 1e-5);
    } else {
      EXPECT_EQ(acc_backward(a, second), ACC_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(acc_last_error_message()).find("second time"), std::string::npos)
          << acc_last_error_message();
      EXPECT_EQ(gradient(), (std::vector<float>{1, 2}));
    }
    for (acc_tensor* t : {out, first, second}) acc_tensor_free(t);
  }
  ACC_ASSERT_OK(acc_model_zero_grad(prepared));
  acc_tensor *out = nullptr, *loss = nullptr, *grad = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(prepared, x, 0, &out));
  ACC_ASSERT_OK(acc_loss_mse(out, zero, ACC_REDUCTION_MEAN, &loss));
  ACC_ASSERT_OK(acc_backward_ex(a, loss, 0, 1));
  ACC_ASSERT_OK(acc_tensor_grad(w, &grad));
  int requires = 0;
  ACC_ASSERT_OK(acc_tensor_requires_grad(grad, &requires));
  EXPECT_EQ(requires, 1) << "create_graph: the gradient has a graph";
  // The gradients' graph refers back to the parameters (PyTorch's documented cycle): set to none.
  ACC_ASSERT_OK(acc_model_zero_grad(prepared));
  for (acc_tensor* t : {x, w, zero, out, loss, grad}) acc_tensor_free(t);
  acc_model_free(model);
  acc_model_free(prepared);
  acc_accelerator_free(a);
}

TEST(Accumulation, OptimizerStepsAtWindowEndsAndAtTheEndOfTheLoader) {
  // 5 batches, 2 accumulation steps: sync after micro-steps 2, 4 and at the last batch (5).
  acc_accelerator* a = make({{"cpu", "1"}, {"gradient_accumulation_steps", "2"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":1,"out_features":1,"bias":false}])", &model));
  acc_optimizer* opt = nullptr;
  acc_options* oo = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  ACC_ASSERT_OK(acc_options_set_double(oo, "lr", 1.0));
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", oo, &opt));
  acc_options_free(oo);
  acc_scheduler* sched = nullptr;
  acc_options* so = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
  ACC_ASSERT_OK(acc_options_set_int(so, "step_size", 1));
  ACC_ASSERT_OK(acc_options_set_double(so, "gamma", 0.5));
  ACC_ASSERT_OK(acc_scheduler_create(opt, "step", so, &sched));
  acc_options_free(so);
  acc_tensor* x = floats({1, 1, 1, 1, 1}, {5, 1});
  const acc_tensor* fields[] = {x};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 1, &ds));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, nullptr, &dl));
  ACC_ASSERT_OK(acc_prepare(a, &model, &opt, &dl, &sched));
  acc_tensor* w = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(model, "0.weight", &w));
  const float w0 = to_floats(w)[0];

  std::vector<int> syncs;
  std::vector<int64_t> scheduler_steps;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    if (!batch) break;
    acc_tensor *xb = nullptr, *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(batch, 0, &xb));
    ACC_ASSERT_OK(acc_accumulate_begin(a));
    int sync = -1;
    ACC_ASSERT_OK(acc_accelerator_sync_gradients(a, &sync));
    syncs.push_back(sync);
    ACC_ASSERT_OK(acc_model_forward1(model, xb, 0, &out));
    ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
    ACC_ASSERT_OK(acc_backward(a, loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_scheduler_step(sched));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_accumulate_end(a));
    int64_t n = 0;
    ACC_ASSERT_OK(acc_scheduler_get_step(sched, &n));
    scheduler_steps.push_back(n);
    for (acc_tensor* t : {xb, out, loss}) acc_tensor_free(t);
    acc_tensor_list_free(batch);
  }
  EXPECT_EQ(syncs, (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(scheduler_steps, (std::vector<int64_t>{0, 1, 1, 2, 3}));
  // Each micro-step adds a gradient of 1/2; the three steps use lr 1, 0.5 and 0.25:
  // w = w0 - 1 * (0.5 + 0.5) - 0.5 * (0.5 + 0.5) - 0.25 * 0.5
  EXPECT_FLOAT_EQ(to_floats(w)[0], w0 - 1.625f);
  acc_model* raw = nullptr;
  ACC_ASSERT_OK(acc_unwrap_model(a, model, &raw));
  EXPECT_NE(raw, nullptr);
  acc_tensor_free(w);
  acc_model_free(raw);
  acc_tensor_free(x);
  acc_dataset_free(ds);
  acc_dataloader_free(dl);
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(MixedPrecision, Bf16ForwardComputesInBf16AndReturnsFp32) {
  acc_accelerator* a = make({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model));
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &prepared));
  acc_tensor* x = floats({0.1234567f, 0.7654321f, -0.333333f}, {1, 3});
  acc_tensor *y_amp = nullptr, *y_fp32 = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(prepared, x, ACC_FORWARD_NO_GRAD, &y_amp));
  ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &y_fp32));  // the raw model: fp32
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  ACC_ASSERT_OK(acc_tensor_dtype(y_amp, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_FLOAT32);
  auto amp = to_floats(y_amp), full = to_floats(y_fp32);
  EXPECT_NE(amp, full);  // bf16 matmul rounds
  for (size_t i = 0; i < amp.size(); ++i) EXPECT_NEAR(amp[i], full[i], 0.02);
  for (acc_tensor* t : {x, y_amp, y_fp32}) acc_tensor_free(t);
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(Accumulation, FreeMemoryStartsTheNextTrainingWithAFreshWindow) {
  acc_accelerator* a = make({{"cpu", "1"}, {"gradient_accumulation_steps", "2"}});
  ACC_ASSERT_OK(acc_accumulate_begin(a));  // a training stopped after one micro-step of a window
  ACC_ASSERT_OK(acc_accumulate_end(a));
  int64_t step = -1;
  ACC_ASSERT_OK(acc_accelerator_step(a, &step));
  EXPECT_EQ(step, 1);
  ACC_ASSERT_OK(acc_free_memory(a));
  ACC_ASSERT_OK(acc_accelerator_step(a, &step));
  EXPECT_EQ(step, 0);
  ACC_ASSERT_OK(acc_accumulate_begin(a));
  int sync = -1;
  ACC_ASSERT_OK(acc_accelerator_sync_gradients(a, &sync));
  EXPECT_EQ(sync, 0);  // the first micro-step of the new window
  ACC_ASSERT_OK(acc_accumulate_end(a));
  acc_accelerator_free(a);
}

TEST(Print, OnlyTheMainProcessPrints) {
  acc_accelerator* a = make({});
  testing::internal::CaptureStdout();
  ACC_ASSERT_OK(acc_print(a, "hello from rank 0"));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "hello from rank 0\n");
  ACC_EXPECT_ERROR(acc_print(a, nullptr), ACC_ERR_INVALID_ARGUMENT, "text is NULL");
  ACC_ASSERT_OK(acc_free_memory(a));
  acc_accelerator_free(a);
}

namespace {

// A short shuffled training run with dropout, seeded through the accelerator's options.
std::vector<float> seeded_run(const char* seed) {
  acc_accelerator* a = make({{"cpu", "1"}, {"seed", seed}});
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":4,"out_features":16},{"type":"dropout","p":0.3},
                                    {"type":"linear","in_features":16,"out_features":3}])",
                                &model),
            ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(model, "adamw", nullptr, &opt), ACC_OK);
  std::vector<float> xs(64 * 4);
  std::vector<int64_t> ys(64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 11) / 11.0f;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>(i % 3);
  acc_tensor* x = floats(xs, {64, 4});
  acc_tensor* y = longs(ys, {64});
  const acc_tensor* fields[] = {x, y};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 2, &ds), ACC_OK);
  acc_options* lo = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &lo), ACC_OK);
  EXPECT_EQ(acc_options_set(lo, "batch_size", "8"), ACC_OK);
  EXPECT_EQ(acc_options_set(lo, "shuffle", "true"), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, lo, &dl), ACC_OK);
  EXPECT_EQ(acc_prepare(a, &model, &opt, &dl, nullptr), ACC_OK);
  for (int epoch = 0; epoch < 2; ++epoch) {
    acc_tensor_list* batch = nullptr;
    while (acc_dataloader_next(dl, &batch) == ACC_OK && batch) {
      acc_tensor *xb = nullptr, *yb = nullptr, *logits = nullptr, *loss = nullptr;
      EXPECT_EQ(acc_tensor_list_get(batch, 0, &xb), ACC_OK);
      EXPECT_EQ(acc_tensor_list_get(batch, 1, &yb), ACC_OK);
      EXPECT_EQ(acc_model_forward1(model, xb, 0, &logits), ACC_OK);
      EXPECT_EQ(acc_loss_cross_entropy(logits, yb, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
      EXPECT_EQ(acc_backward(a, loss), ACC_OK);
      EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
      EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      for (acc_tensor* t : {xb, yb, logits, loss}) acc_tensor_free(t);
      acc_tensor_list_free(batch);
    }
  }
  acc_tensor* w = nullptr;
  EXPECT_EQ(acc_model_parameter(model, "2.weight", &w), ACC_OK);
  auto weights = to_floats(w);
  for (acc_tensor* t : {x, y, w}) acc_tensor_free(t);
  acc_options_free(lo);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(a);
  return weights;
}

}  // namespace

TEST(SetSeed, TheSameSeedGivesTheSameRun) {
  const auto first = seeded_run("1234");
  EXPECT_EQ(seeded_run("1234"), first);  // init, shuffling and dropout all follow the seed
  EXPECT_NE(seeded_run("99"), first);
}

TEST(Accelerator, ARendezvousThatNobodyJoinsTimesOut) {
  // Rank 0 of 2 whose peer never starts, and rank 1 whose rank 0 never starts: creation fails
  // within timeout_seconds (not a multiple of it), it does not hang.
  for (const char* r : {"0", "1"}) {
    EnvVar rank("RANK", r), world("WORLD_SIZE", "2"), addr("MASTER_ADDR", "127.0.0.1"), port("MASTER_PORT", "29517");
    acc_accelerator* a = nullptr;
    const auto started = std::chrono::steady_clock::now();
    ACC_EXPECT_ERROR(acc_test::create_accelerator({{"timeout_seconds", "2"}}, &a), ACC_ERR_TIMEOUT,
                     "rendezvous of 2 processes at 127.0.0.1:29517");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_LT(seconds, 3.0) << "rank " << r << " gave up after " << seconds << " s with a timeout of 2 s";
    EXPECT_EQ(a, nullptr);
  }
}

TEST(Accelerator, ProcessGroupBackendIsCheckedBeforeTheRendezvous) {
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "backend", "mpi"), ACC_ERR_INVALID_ARGUMENT, "gloo");
  acc_options_free(o);
  // NCCL takes CUDA tensors only: a CPU job asking for it fails at once, naming the way out, instead
  // of waiting for its peer (which never starts here).
  EnvVar rank("RANK", "0"), world("WORLD_SIZE", "2"), addr("MASTER_ADDR", "127.0.0.1"), port("MASTER_PORT", "29518");
  acc_accelerator* a = nullptr;
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"cpu", "1"}, {"backend", "nccl"}, {"timeout_seconds", "60"}}, &a),
                   ACC_ERR_UNSUPPORTED, "backend \"nccl\" needs a CUDA device");
  EXPECT_EQ(a, nullptr);
}

TEST(Clipping, GradNormAndValueFollowTorchsDefinitions) {
  acc_accelerator* a = make({{"cpu", "1"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1,"bias":false}])", &model));
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, model, ACC_PLACEMENT_DEFAULT, &prepared));
  auto grads_for = [&](std::vector<float> x) {
    acc_tensor* xt = floats(x, {1, 2});
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_zero_grad(prepared), ACC_OK);
    EXPECT_EQ(acc_model_forward1(prepared, xt, 0, &out), ACC_OK);
    EXPECT_EQ(acc_tensor_sum(out, &loss), ACC_OK);
    EXPECT_EQ(acc_backward(a, loss), ACC_OK);  // d loss / d w = x
    for (acc_tensor* t : {xt, out, loss}) acc_tensor_free(t);
  };
  auto grad = [&]() {
    acc_tensor *w = nullptr, *g = nullptr;
    EXPECT_EQ(acc_model_parameter(prepared, "0.weight", &w), ACC_OK);
    EXPECT_EQ(acc_tensor_grad(w, &g), ACC_OK);
    auto v = to_floats(g);
    acc_tensor_free(w);
    acc_tensor_free(g);
    return v;
  };
  grads_for({3, 4});  // norm 5
  double norm = 0;
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, 1.0, 2.0, &norm));
  EXPECT_NEAR(norm, 5.0, 1e-9);
  EXPECT_NEAR(grad()[0], 0.6, 1e-5);
  EXPECT_NEAR(grad()[1], 0.8, 1e-5);
  grads_for({3, 4});
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, 10.0, 2.0, &norm));  // under the limit: unchanged
  EXPECT_EQ(grad(), (std::vector<float>{3, 4}));
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, 1.0, INFINITY, &norm));
  EXPECT_NEAR(norm, 4.0, 1e-9);
  // As torch takes them: max_norm inf measures without clipping, 0 zeroes; -inf is the smallest
  // magnitude, 0 the count of gradients that are not all zero.
  grads_for({3, 4});
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, INFINITY, 2.0, &norm));
  EXPECT_NEAR(norm, 5.0, 1e-6);
  EXPECT_EQ(grad(), (std::vector<float>{3, 4}));
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, INFINITY, -INFINITY, &norm));
  EXPECT_EQ(norm, 3.0);
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, INFINITY, 0.0, &norm));
  EXPECT_EQ(norm, 1.0);  // one parameter, its gradient not all zero
  ACC_ASSERT_OK(acc_clip_grad_norm(a, prepared, 0.0, 2.0, &norm));
  EXPECT_EQ(grad(), (std::vector<float>{0, 0}));
  ACC_EXPECT_ERROR(acc_clip_grad_norm(a, prepared, 1.0, NAN, &norm), ACC_ERR_INVALID_ARGUMENT, "norm_type");
  grads_for({3, -4});
  ACC_ASSERT_OK(acc_clip_grad_value(a, prepared, 2.0));
  EXPECT_EQ(grad(), (std::vector<float>{2, -2}));
  ACC_EXPECT_ERROR(acc_clip_grad_norm(a, prepared, -1.0, 2.0, &norm), ACC_ERR_INVALID_ARGUMENT, "max_norm");
  ACC_EXPECT_ERROR(acc_clip_grad_value(a, prepared, NAN), ACC_ERR_INVALID_ARGUMENT, "clip_value");
  ACC_EXPECT_ERROR(acc_clip_grad_value(a, prepared, -1.0), ACC_ERR_INVALID_ARGUMENT, "clip_value");
  grads_for({3, -4});
  ACC_ASSERT_OK(acc_clip_grad_value(a, prepared, INFINITY));  // torch's clip_grad_value_(p, inf): no clipping
  EXPECT_EQ(grad(), (std::vector<float>{3, -4}));
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(LocalSgd, ScopesAreCheckedAndShardingIsRefused) {
  acc_accelerator* a = make({{"cpu", "1"}});
  acc_model *raw = nullptr, *model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &raw));
  ACC_ASSERT_OK(acc_prepare_model(a, raw, ACC_PLACEMENT_DEFAULT, &model));
  ACC_EXPECT_ERROR(acc_local_sgd_step(a, model), ACC_ERR_INVALID_ARGUMENT, "local_sgd_step without local_sgd_begin");
  ACC_EXPECT_ERROR(acc_local_sgd_begin(a, model, 0, 1), ACC_ERR_INVALID_ARGUMENT, "local_sgd_steps must be >= 1");
  ACC_ASSERT_OK(acc_local_sgd_begin(a, model, 2, 1));
  ACC_EXPECT_ERROR(acc_local_sgd_begin(a, raw, 2, 1), ACC_ERR_INVALID_ARGUMENT, "already open");  // the same model
  for (int i = 0; i < 3; ++i) ACC_ASSERT_OK(acc_local_sgd_step(a, model));  // one process: counting only
  ACC_ASSERT_OK(acc_local_sgd_end(a, model));
  ACC_EXPECT_ERROR(acc_local_sgd_end(a, model), ACC_ERR_INVALID_ARGUMENT, "local_sgd_end without local_sgd_begin");
  acc_model_free(model);
  acc_model_free(raw);
  acc_accelerator_free(a);

  // Accelerate refuses LocalSGD under DeepSpeed and FSDP whatever the number of processes.
  a = make({{"cpu", "1"}, {"zero_stage", "2"}});
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &raw));
  ACC_ASSERT_OK(acc_prepare_model(a, raw, ACC_PLACEMENT_DEFAULT, &model));
  ACC_EXPECT_ERROR(acc_local_sgd_begin(a, model, 2, 1), ACC_ERR_UNSUPPORTED, "not with sharding (zero_stage 2)");
  acc_model_free(model);
  acc_model_free(raw);
  acc_accelerator_free(a);
}

// The activation_checkpointing option (FSDP's fsdp_activation_checkpointing) checkpoints a spec
// model's layers, which then train as without; a TorchScript model cannot honour it and says so.
TEST(Accelerator, ActivationCheckpointingNeedsASpecModel) {
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "1"}, {"activation_checkpointing", "true"}});
  acc_model *raw = nullptr, *model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/classifier.pt").c_str(), &raw));
  ACC_EXPECT_ERROR(acc_prepare_model(a, raw, ACC_PLACEMENT_DEFAULT, &model), ACC_ERR_UNSUPPORTED,
                   "fsdp_activation_checkpointing");
  acc_model_free(raw);
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &raw));
  ACC_ASSERT_OK(acc_prepare_model(a, raw, ACC_PLACEMENT_DEFAULT, &model));
  acc_model_free(model);
  acc_model_free(raw);
  acc_accelerator_free(a);
}

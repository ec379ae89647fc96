// Training-step semantics on several processes: the scheduler steps once per process per optimizer
// step (Accelerate's own check: LambdaLR(1 - n/10) is at 1 - P/10 after one step), gradient
// accumulation with DDP equals one step on the whole job's batch, a second Accelerator in the same
// process shares the process group, and batch samplers of varying sizes shard without even_batches.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../capi/support.h"
#include "job.h"

using acc_test::floats;
using acc_test::to_floats;

namespace {

int linear_decay(void*, int64_t step, double* factor) {
  *factor = 1.0 - static_cast<double>(step) / 10.0;
  return 0;
}

const char* kLinear = R"([{"type":"linear","in_features":3,"out_features":2}])";

struct Net {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_scheduler* sched = nullptr;
  Net(double lr, bool schedule) {
    EXPECT_EQ(acc_model_from_spec(kLinear, &model), ACC_OK);
    acc_options* oo = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo), ACC_OK);
    EXPECT_EQ(acc_options_set_double(oo, "lr", lr), ACC_OK);
    EXPECT_EQ(acc_optimizer_create(model, "sgd", oo, &opt), ACC_OK);
    acc_options_free(oo);
    if (schedule) EXPECT_EQ(acc_scheduler_create_lambda(opt, linear_decay, nullptr, nullptr, &sched), ACC_OK);
  }
  ~Net() {
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
  // One micro-step on rows [first, first + n) of the job's data.
  void micro_step(acc_accelerator* acc, int64_t first, int64_t n) {
    std::vector<float> x, y;
    for (int64_t r = first; r < first + n; ++r) {
      for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.9f * static_cast<float>(r * 3 + f)));
      for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.4f * static_cast<float>(r + f)));
    }
    acc_tensor* xt = floats(x, {n, 3});
    acc_tensor* yt = floats(y, {n, 2});
    acc_tensor *out = nullptr, *loss = nullptr;
    if (acc) ASSERT_EQ(acc_accumulate_begin(acc), ACC_OK);
    ASSERT_EQ(acc_model_forward1(model, xt, 0, &out), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    if (acc)
      ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
    else
      ASSERT_EQ(acc_tensor_backward(loss), ACC_OK);
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
    if (sched) ASSERT_EQ(acc_scheduler_step(sched), ACC_OK);
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    if (acc) ASSERT_EQ(acc_accumulate_end(acc), ACC_OK);
    for (acc_tensor* t : {xt, yt, out, loss}) acc_tensor_free(t);
  }
  double lr() const {
    double v = 0;
    EXPECT_EQ(acc_optimizer_get_lr(opt, 0, &v), ACC_OK);
    return v;
  }
  std::vector<float> weight() const {
    acc_tensor* w = nullptr;
    EXPECT_EQ(acc_model_parameter(model, "0.weight", &w), ACC_OK);
    auto values = to_floats(w);
    acc_tensor_free(w);
    return values;
  }
};

}  // namespace

TEST(Training, TheSchedulerStepsOncePerProcess) {
  if (g_world > 10) GTEST_SKIP() << "the schedule ends at 10 steps";
  Net net(1.0, true);
  ACC_ASSERT_OK(acc_prepare(g_acc, &net.model, &net.opt, nullptr, &net.sched));
  net.micro_step(g_acc, 0, 2);
  EXPECT_DOUBLE_EQ(net.lr(), 1.0 - static_cast<double>(g_world) / 10.0);
  ACC_ASSERT_OK(acc_free_memory(g_acc));
}

TEST(Training, AccumulationWithDdpEqualsOneStepOnTheJobsBatch) {
  // A second accelerator in the same process: it shares the job's process group.
  acc_accelerator* acc = acc_test::make_accelerator({{"gradient_accumulation_steps", "2"}});
  ASSERT_NE(acc, nullptr);
  constexpr int64_t rows = 4;  // per process per micro-step
  ACC_ASSERT_OK(acc_set_seed(5));
  Net ddp(0.1, false);
  ACC_ASSERT_OK(acc_prepare(acc, &ddp.model, &ddp.opt, nullptr, nullptr));
  ACC_ASSERT_OK(acc_set_seed(5));
  Net reference(0.1, false);  // one process, plain libtorch semantics, the whole window's rows at once
  for (int window = 0; window < 2; ++window) {
    const int64_t base = window * 2 * rows * g_world;
    // Micro-step m of process r takes rows base + (m * P + r) * rows ... (+ rows).
    for (int64_t m = 0; m < 2; ++m) ddp.micro_step(acc, base + (m * g_world + g_rank) * rows, rows);
    reference.micro_step(nullptr, base, 2 * rows * g_world);
  }
  const auto got = ddp.weight(), want = reference.weight();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "weight " << i;
  acc_accelerator_free(acc);
}

namespace {

// After one micro-step that does not end the window, whether every process holds the same gradient
// (an allreduce ran) under an accelerator with sync_each_batch set as given.
bool gradients_agree_after_a_local_micro_step(const char* sync_each_batch) {
  acc_accelerator* acc =
      acc_test::make_accelerator({{"gradient_accumulation_steps", "2"}, {"sync_each_batch", sync_each_batch}});
  Net net(0.1, false);
  EXPECT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, nullptr), ACC_OK);
  net.micro_step(acc, g_rank * 4, 4);  // different rows on every process; no optimizer step yet
  acc_tensor *w = nullptr, *grad = nullptr, *all = nullptr;
  EXPECT_EQ(acc_model_parameter(net.model, "0.weight", &w), ACC_OK);
  EXPECT_EQ(acc_tensor_grad(w, &grad), ACC_OK);
  EXPECT_EQ(acc_gather(acc, grad, "grad", &all), ACC_OK) << acc_last_error_message();
  const auto values = to_floats(all);
  const size_t per = values.size() / static_cast<size_t>(g_world);
  bool agree = true;
  for (size_t i = per; i < values.size(); ++i) agree = agree && values[i] == values[i % per];
  for (acc_tensor* t : {w, grad, all}) acc_tensor_free(t);
  EXPECT_EQ(acc_accumulate_begin(acc), ACC_OK);  // finish the window so every process is in step
  acc_accelerator_free(acc);
  return agree;
}

}  // namespace

TEST(Training, SyncEachBatchAllreducesEveryMicroStep) {
  EXPECT_FALSE(gradients_agree_after_a_local_micro_step("0"));  // no_sync: each process keeps its own
  EXPECT_TRUE(gradients_agree_after_a_local_micro_step("1"));
}

TEST(Training, BatchSamplersOfVaryingSizesShardWithoutEvenBatches) {
  // 7 batches of sizes 1..7 over the ids 0..27, laid end to end.
  std::vector<int64_t> ids(28);
  for (int64_t i = 0; i < 28; ++i) ids[i] = i;
  std::vector<size_t> sizes = {1, 2, 3, 4, 5, 6, 7};
  acc_tensor* t = acc_test::longs(ids, {28});
  const acc_tensor* fields[] = {t};
  acc_dataset* ds = nullptr;
  ASSERT_EQ(acc_dataset_from_tensors(fields, 1, &ds), ACC_OK);
  auto make_loader = [&] {
    acc_dataloader* dl = nullptr;
    EXPECT_EQ(acc_dataloader_create_from_batches(ds, ids.data(), sizes.data(), sizes.size(), nullptr, &dl), ACC_OK);
    return dl;
  };
  acc_dataloader* refused = make_loader();
  ACC_EXPECT_ERROR(acc_prepare(g_acc, nullptr, nullptr, &refused, nullptr), ACC_ERR_INVALID_ARGUMENT, "even_batches");
  acc_dataloader_free(refused);

  acc_accelerator* acc = acc_test::make_accelerator({{"even_batches", "0"}});
  acc_dataloader* dl = make_loader();
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
  // Process r gets batches r, r + P, ... (Accelerate's BatchSamplerShard with batch_size None).
  std::vector<int64_t> got, want;
  for (size_t b = static_cast<size_t>(g_rank), first = 0; b < sizes.size(); b += static_cast<size_t>(g_world)) {
    first = 0;
    for (size_t k = 0; k < b; ++k) first += sizes[k];
    for (size_t k = 0; k < sizes[b]; ++k) want.push_back(static_cast<int64_t>(first + k));
  }
  int64_t length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, (7 - g_rank + g_world - 1) / g_world);
  for (acc_tensor_list* batch = nullptr; acc_dataloader_next(dl, &batch) == ACC_OK && batch;) {
    acc_tensor* b = nullptr;
    ASSERT_EQ(acc_tensor_list_get(batch, 0, &b), ACC_OK);
    int64_t n = 0;
    ASSERT_EQ(acc_tensor_numel(b, &n), ACC_OK);
    std::vector<int64_t> values(static_cast<size_t>(n));
    ASSERT_EQ(acc_tensor_to_host(b, values.data(), values.size() * 8), ACC_OK);
    got.insert(got.end(), values.begin(), values.end());
    acc_tensor_free(b);
    acc_tensor_list_free(batch);
  }
  EXPECT_EQ(got, want);
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  acc_tensor_free(t);
  acc_dataset_free(ds);
}

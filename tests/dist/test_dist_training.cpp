// Training-step semantics on several processes: the scheduler steps once per process per optimizer
// step (Accelerate's own check: LambdaLR(1 - n/10) is at 1 - P/10 after one step), gradient
// accumulation with DDP equals one step on the whole job's batch, a second Accelerator in the same
// process shares the process group, and batch samplers of varying sizes shard as Accelerate's.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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
// With buffers: a batch norm's running statistics.
const char* kBatchNormNet = R"([{"type":"linear","in_features":3,"out_features":4},
    {"type":"batchnorm1d","num_features":4},{"type":"linear","in_features":4,"out_features":2}])";

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
    yt = acc_test::on_device_of(out, yt);
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
  std::vector<float> weight() const { return weights(model, "0.weight"); }
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

TEST(Training, BatchSamplersOfVaryingSizesShardAsAccelerateDoes) {
  // 7 batches of sizes 1..7 over the ids 0..27, laid end to end.
  std::vector<int64_t> ids(28);
  for (int64_t i = 0; i < 28; ++i) ids[i] = i;
  const std::vector<size_t> sizes = {1, 2, 3, 4, 5, 6, 7};
  acc_tensor* t = acc_test::longs(ids, {28});
  const acc_tensor* fields[] = {t};
  acc_dataset* ds = nullptr;
  ASSERT_EQ(acc_dataset_from_tensors(fields, 1, &ds), ACC_OK);
  // The ids of batch b.
  auto batch_ids = [&](size_t b) {
    size_t first = 0;
    for (size_t k = 0; k < b; ++k) first += sizes[k];
    std::vector<int64_t> out;
    for (size_t k = 0; k < sizes[b]; ++k) out.push_back(static_cast<int64_t>(first + k));
    return out;
  };
  const auto world = static_cast<size_t>(g_world), rank = static_cast<size_t>(g_rank);
  for (const bool even : {false, true}) {
    SCOPED_TRACE(even ? "even_batches" : "without even_batches");
    acc_accelerator* acc = acc_test::make_accelerator({{"even_batches", even ? "1" : "0"}});
    acc_dataloader* dl = nullptr;
    ASSERT_EQ(acc_dataloader_create_from_batches(ds, ids.data(), sizes.data(), sizes.size(), nullptr, &dl), ACC_OK);
    ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    // Process r gets batches r, r + P, ... (Accelerate's BatchSamplerShard with batch_size None);
    // with even_batches the last round is completed with whole batches from the start: 0, 1, ...
    std::vector<int64_t> want;
    const size_t rounds = (sizes.size() + world - 1) / world, batches = even ? rounds * world : sizes.size();
    for (size_t b = rank; b < batches; b += world)
      for (int64_t id : batch_ids(b < sizes.size() ? b : (b - sizes.size()) % std::min(world, sizes.size())))
        want.push_back(id);
    int64_t length = 0;
    ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
    EXPECT_EQ(length, static_cast<int64_t>((batches - rank + world - 1) / world));
    EXPECT_EQ(acc_test::epoch_ids(dl), want);
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
  }
  acc_tensor_free(t);
  acc_dataset_free(ds);
}

namespace {

// Rank `rank`'s 4 samples at `step` (inputs of 3 features, targets of 2).
std::vector<float> rank_rows(int64_t rank, int step, int64_t width, bool targets) {
  std::vector<float> v;
  for (int64_t i = 0; i < 4 * width; ++i) {
    const auto k = static_cast<float>(rank * 97 + step * 13 + i);
    v.push_back(targets ? std::cos(0.3f * k) : std::sin(0.7f * k));
  }
  return v;
}

// Forward and backward of rank `rank`'s batch at `step` (acc: the accelerator's backward; null: plain).
void forward_backward(acc_model* m, acc_accelerator* acc, int64_t rank, int step) {
  train_step(m, nullptr, rank_rows(rank, step, 3, false), rank_rows(rank, step, 2, true), 4, acc);
}

std::vector<float> all_weights(acc_model* m) {
  std::vector<float> all;
  for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    const auto v = weights(m, name);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

TEST(Training, FrozenParametersStayOutOfDdp) {
  // The first layer frozen before prepare: DDP's Reducer leaves it out (no allreduce waits for its
  // gradient), it does not move, and the trainable layer ends equal on every process.
  acc_model* model = nullptr;
  ASSERT_EQ(acc_set_seed(3), ACC_OK);
  ASSERT_EQ(acc_model_from_spec(kDistNet, &model), ACC_OK);
  ASSERT_EQ(acc_model_set_requires_grad(model, "0.*", 0, nullptr), ACC_OK) << acc_last_error_message();
  acc_optimizer* opt = nullptr;
  ASSERT_EQ(acc_optimizer_create(model, "sgd", nullptr, &opt), ACC_OK);
  ASSERT_EQ(acc_prepare(g_acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  const auto frozen = weights(model, "0.weight"), trained = weights(model, "2.weight");
  std::vector<float> x, y;
  for (int i = 0; i < 8; ++i) {  // different rows on every process
    for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.3f * static_cast<float>(g_rank * 100 + i * 3 + f)));
    for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.2f * static_cast<float>(g_rank * 100 + i + f)));
  }
  for (int step = 0; step < 3; ++step) train_step(model, opt, x, y, 8, g_acc);
  EXPECT_EQ(weights(model, "0.weight"), frozen);
  const auto after = weights(model, "2.weight");
  EXPECT_NE(after, trained);
  acc_tensor* mine = floats(after, {static_cast<int64_t>(after.size())});
  acc_tensor* all = nullptr;
  ASSERT_EQ(acc_gather(g_acc, mine, "frozen ddp weights", &all), ACC_OK);
  const auto gathered = to_floats(all);
  for (int64_t r = 1; r < g_world; ++r)
    EXPECT_EQ(std::vector<float>(gathered.begin() + r * after.size(), gathered.begin() + (r + 1) * after.size()),
              after)
        << "replica " << r;
  for (acc_tensor* t : {mine, all}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

TEST(Join, ProcessesThatRunOutOfStepsJoinTheOthersUntilTheEnd) {
  // Rank r trains 2 + r steps. At each step the job's gradient is the sum over the ranks still
  // training, divided by the number of processes (torch's Join default); at the end every replica
  // holds the weights of the last rank, which trained every step.
  const int steps = static_cast<int>(2 + g_rank), most = static_cast<int>(1 + g_world);
  TwinModels twins(kDistNet, 5, 0.2 / static_cast<double>(g_world), 0.2);  // the reference steps with sum / P
  acc_model *local = twins.local, *&model = twins.model;
  acc_optimizer *local_opt = twins.local_opt, *&opt = twins.opt;
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));

  // The reference, on this process alone: every rank's batches, step by step.
  for (int step = 0; step < most; ++step) {
    for (int64_t r = 0; r < g_world; ++r)
      if (step < 2 + r) forward_backward(local, nullptr, r, step);
    ACC_ASSERT_OK(acc_optimizer_step(local_opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(local_opt));
  }

  ACC_ASSERT_OK(acc_join_uneven_inputs_begin(g_acc, model, -1));
  for (int step = 0; step < steps; ++step) {
    forward_backward(model, g_acc, g_rank, step);
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
  }
  ACC_ASSERT_OK(acc_join_uneven_inputs_end(g_acc, model));
  const auto expected = all_weights(local), got = all_weights(model);
  ASSERT_EQ(got.size(), expected.size());
  const double tolerance = std::getenv("ACC_TEST_COMM_HOOK") ? 2e-3 : 1e-5;  // 16-bit gradients on the wire
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << "weight " << i;
  ACC_EXPECT_ERROR(acc_join_uneven_inputs_end(g_acc, model), ACC_ERR_INVALID_ARGUMENT, "without");
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));  // the job goes on in step
}

TEST(Join, BuffersAndAccumulationStayMatchedAndReplicasEndEqual) {
  // A model with batch-norm buffers (broadcast as PyTorch's DDP does) and accumulation over 2
  // micro-steps (no allreduce on the first): rank r runs 3 + 2r micro-steps, then all agree.
  acc_accelerator* acc = acc_test::make_accelerator({{"gradient_accumulation_steps", "2"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kBatchNormNet, &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "adam", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  ACC_ASSERT_OK(acc_join_uneven_inputs_begin(acc, model, -1));
  for (int step = 0; step < 3 + 2 * g_rank; ++step) {
    ACC_ASSERT_OK(acc_accumulate_begin(acc));
    forward_backward(model, acc, g_rank, step);
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_accumulate_end(acc));
  }
  ACC_ASSERT_OK(acc_join_uneven_inputs_end(acc, model));
  // Every replica now equals process 0's, buffers included.
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_get_state_dict(acc, model, 1, &state));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(state, &n));
  for (size_t i = 0; i < n; ++i) {
    acc_tensor *t = nullptr, *root = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(state, i, &t));
    ACC_ASSERT_OK(acc_broadcast(acc, t, 0, "replica check", &root));
    const char* name = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(state, i, &name));
    if (std::string(name).find("num_batches_tracked") == std::string::npos)
      EXPECT_EQ(to_floats(t), to_floats(root)) << name;
    acc_tensor_free(t);
    acc_tensor_free(root);
  }
  acc_tensor_list_free(state);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

namespace {

// The batch norm's running mean, and whether every process holds the same.
std::vector<float> running_mean(acc_model* model) {
  acc_tensor_list* state = nullptr;
  acc_tensor* mean = nullptr;
  EXPECT_EQ(acc_model_state_dict(model, &state), ACC_OK);
  EXPECT_EQ(acc_tensor_list_find(state, "1.running_mean", &mean), ACC_OK) << acc_last_error_message();
  auto values = to_floats(mean);
  acc_tensor_free(mean);
  acc_tensor_list_free(state);
  return values;
}

bool same_on_every_process(acc_accelerator* acc, const std::vector<float>& values) {
  acc_tensor* mine = floats(values, {static_cast<int64_t>(values.size())});
  acc_tensor* root = nullptr;
  EXPECT_EQ(acc_broadcast(acc, mine, 0, "running mean", &root), ACC_OK);
  const double differs = to_floats(root) == values ? 0.0 : 1.0;
  acc_tensor *sum_tensor = nullptr, *flag = floats({static_cast<float>(differs)}, {1});
  EXPECT_EQ(acc_reduce(acc, flag, ACC_REDUCTION_SUM, "running mean differs", &sum_tensor), ACC_OK);
  const bool same = to_floats(sum_tensor)[0] == 0.0f;
  for (acc_tensor* t : {mine, root, flag, sum_tensor}) acc_tensor_free(t);
  return same;
}

}  // namespace

// PyTorch's DDP broadcasts buffers from process 0 at a forward only when the forward before it
// recorded gradients that its backward averages (require_forward_param_sync): not at the forward
// after a no_sync micro-step, but at the first forward without gradients after training, so an
// evaluation runs with process 0's running statistics (found side by side with Accelerate).
TEST(Training, BuffersAreBroadcastAsPyTorchsDdpDoes) {
  acc_accelerator* acc = acc_test::make_accelerator({{"gradient_accumulation_steps", "2"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kBatchNormNet, &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  // A micro-step inside the window (no_sync) on each process's own rows, then the window's last on
  // the same rows everywhere: without a broadcast before it, the statistics stay apart.
  for (int64_t rows_of : {g_rank, int64_t{0}}) {
    ACC_ASSERT_OK(acc_accumulate_begin(acc));
    forward_backward(model, acc, rows_of, 0);
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_accumulate_end(acc));
  }
  EXPECT_FALSE(same_on_every_process(acc, running_mean(model)))
      << "the forward after a no_sync micro-step broadcast the buffers";
  // The evaluation's first forward takes process 0's statistics.
  ACC_ASSERT_OK(acc_model_set_training(model, 0));
  acc_tensor* x = floats({0.5f, -1.0f, 2.0f}, {1, 3});
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_TRUE(same_on_every_process(acc, running_mean(model))) << "the evaluation did not start from process 0's";
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(Join, CombinationsItDoesNotCoverAreRefused) {
  acc_accelerator* acc = acc_test::make_accelerator({{"ddp_find_unused_parameters", "true"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model));
  ACC_ASSERT_OK(acc_prepare(acc, &model, nullptr, nullptr, nullptr));
  ACC_EXPECT_ERROR(acc_join_uneven_inputs_begin(acc, model, -1), ACC_ERR_UNSUPPORTED, "ddp_find_unused_parameters");
  acc_model_free(model);
  acc_accelerator_free(acc);

  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, nullptr, nullptr, nullptr));
  ACC_ASSERT_OK(acc_join_uneven_inputs_begin(g_acc, model, -1));
  ACC_EXPECT_ERROR(acc_trigger_sync_in_backward(g_acc, model), ACC_ERR_UNSUPPORTED, "inside join_uneven_inputs");
  if (std::getenv("ACC_TEST_STATIC_GRAPH")) {
    // A static graph's first averaging step must come before a process's data ends.
    ACC_EXPECT_ERROR(acc_join_uneven_inputs_end(g_acc, model), ACC_ERR_UNSUPPORTED, "before the first averaging step");
  } else {
    ACC_ASSERT_OK(acc_join_uneven_inputs_end(g_acc, model));  // nobody trained: every process ends at once
  }
  acc_model_free(model);
}

// Processes still training must agree whether a backward averages gradients: otherwise some
// allreduce buckets that the others do not (found with accumulation windows that end where each
// process's loader ends, with even_batches off: Gloo aborted the process). Every process, a joined
// one included, fails at the same step with the same error, and none hangs.
TEST(Join, ProcessesThatDisagreeWhetherToAverageFailAlike) {
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kBatchNormNet, &model));
  ACC_ASSERT_OK(acc_prepare(acc, &model, nullptr, nullptr, nullptr));
  ACC_ASSERT_OK(acc_join_uneven_inputs_begin(acc, model, -1));
  // On 3 or more processes the last one joins after a step all take; then process 0 accumulates
  // while the others average. On 2, process 0 accumulates at the first step.
  const bool one_joins = g_world >= 3;
  const int disagreeing_step = one_joins ? 1 : 0;
  if (one_joins && g_rank == g_world - 1) {
    forward_backward(model, acc, g_rank, 0);
    ACC_EXPECT_ERROR(acc_join_uneven_inputs_end(acc, model), ACC_ERR_UNSUPPORTED, "accumulate them (no_sync)");
  } else {
    for (int step = 0; step < disagreeing_step; ++step) forward_backward(model, acc, g_rank, step);
    if (g_rank == 0) ACC_ASSERT_OK(acc_no_sync_begin(acc, model));
    acc_tensor* x = floats(rank_rows(g_rank, disagreeing_step, 3, false), {4, 3});
    acc_tensor* out = nullptr;
    ACC_EXPECT_ERROR(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out), ACC_ERR_UNSUPPORTED,
                     "accumulate them (no_sync)");
    EXPECT_EQ(out, nullptr);
    acc_tensor_free(x);
    if (g_rank == 0) ACC_ASSERT_OK(acc_no_sync_end(acc, model));
  }
  // Every process took the same collectives: the group goes on.
  acc_tensor *one = floats({1.0f}, {1}), *sum = nullptr;
  ACC_ASSERT_OK(acc_reduce(acc, one, ACC_REDUCTION_SUM, "after the refused step", &sum));
  EXPECT_EQ(to_floats(sum)[0], static_cast<float>(g_world));
  for (acc_tensor* t : {one, sum}) acc_tensor_free(t);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(Join, EvenBatchesCanBeTurnedOffForTheJoin) {
  // 10 samples in batches of 2: 5 batches over P processes. Prepared with even_batches (the
  // default) every process gets ceil(5 / P) of them; inside a join with even_batches off, process r
  // gets batches r, r + P, ... only, trains on them, and the loader is as prepared again after it.
  std::vector<float> x, y;
  for (int i = 0; i < 10; ++i) {
    for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.5f * static_cast<float>(i * 3 + f)));
    for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.4f * static_cast<float>(i + f)));
  }
  acc_tensor* xt = floats(x, {10, 3});
  acc_tensor* yt = floats(y, {10, 2});
  const acc_tensor* fields[] = {xt, yt};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 2, &ds));
  acc_options* lo = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
  ACC_ASSERT_OK(acc_options_set_int(lo, "batch_size", 2));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, lo, &dl));
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, &dl, nullptr));
  auto length = [&] {
    int64_t n = -1;
    EXPECT_EQ(acc_dataloader_length(dl, &n), ACC_OK);
    return n;
  };
  const int64_t even = (5 + g_world - 1) / g_world, mine = (5 - g_rank + g_world - 1) / g_world;
  EXPECT_EQ(length(), even);

  ACC_ASSERT_OK(acc_join_uneven_inputs_begin(g_acc, model, 0));
  EXPECT_EQ(length(), mine);
  int64_t trained = 0;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    if (!batch) break;
    acc_tensor *bx = nullptr, *by = nullptr, *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(batch, 0, &bx));
    ACC_ASSERT_OK(acc_tensor_list_get(batch, 1, &by));
    ACC_ASSERT_OK(acc_model_forward1(model, bx, ACC_FORWARD_DEFAULT, &out));
    ACC_ASSERT_OK(acc_loss_mse(out, by, ACC_REDUCTION_MEAN, &loss));
    ACC_ASSERT_OK(acc_backward(g_acc, loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    for (acc_tensor* t : {bx, by, out, loss}) acc_tensor_free(t);
    acc_tensor_list_free(batch);
    ++trained;
  }
  ACC_ASSERT_OK(acc_join_uneven_inputs_end(g_acc, model));
  EXPECT_EQ(trained, mine);
  EXPECT_EQ(length(), even);
  ACC_EXPECT_ERROR(acc_join_uneven_inputs_begin(g_acc, model, 2), ACC_ERR_INVALID_ARGUMENT, "even_batches must be");
  for (acc_tensor* t : {xt, yt}) acc_tensor_free(t);
  acc_options_free(lo);
  acc_dataset_free(ds);
  acc_dataloader_free(dl);
  acc_optimizer_free(opt);
  acc_model_free(model);
  ACC_ASSERT_OK(acc_free_memory(g_acc));
}

namespace {

// Sets each replica's parameter `name` to the mean over the replicas, summed in process order (as
// Gloo's allreduce sums two processes; on more its ring may add in another order).
void average_replicas(const std::vector<std::unique_ptr<Net>>& replicas) {
  for (const char* name : {"0.weight", "0.bias"}) {
    std::vector<float> sum = weights(replicas[0]->model, name);
    for (size_t r = 1; r < replicas.size(); ++r) {
      const auto w = weights(replicas[r]->model, name);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += w[i];
    }
    for (float& v : sum) v /= static_cast<float>(replicas.size());
    for (const auto& replica : replicas) {
      acc_tensor_list* state = nullptr;
      ASSERT_EQ(acc_tensor_list_create(&state), ACC_OK);
      acc_tensor* t = floats(sum, name == std::string("0.weight") ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2});
      ASSERT_EQ(acc_tensor_list_append(state, name, t), ACC_OK);
      ASSERT_EQ(acc_model_load_state_dict(replica->model, state, 0), ACC_OK) << acc_last_error_message();
      acc_tensor_free(t);
      acc_tensor_list_free(state);
    }
  }
}

}  // namespace

TEST(LocalSgd, ProcessesStepAloneAndAverageEveryKStepsAndAtTheEnd) {
  constexpr int64_t kEvery = 2, kSteps = 5, kRows = 4;
  ACC_ASSERT_OK(acc_set_seed(9));
  Net net(0.1, false);
  ACC_ASSERT_OK(acc_prepare(g_acc, &net.model, &net.opt, nullptr, nullptr));
  std::vector<std::unique_ptr<Net>> replicas;  // every process's replica, trained here alone
  for (int64_t r = 0; r < g_world; ++r) {
    ACC_ASSERT_OK(acc_set_seed(9));
    replicas.push_back(std::make_unique<Net>(0.1, false));
  }
  const double bound = g_world == 2 ? 0.0 : 1e-6;
  auto expect_matches_replica = [&](const char* when) {
    const auto got = net.weight(), want = replicas[static_cast<size_t>(g_rank)]->weight();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], bound) << when << ", weight " << i;
  };
  ACC_ASSERT_OK(acc_local_sgd_begin(g_acc, net.model, kEvery, 1));
  for (int64_t step = 0; step < kSteps; ++step) {
    net.micro_step(g_acc, (step * g_world + g_rank) * kRows, kRows);  // this process's rows only
    ACC_ASSERT_OK(acc_local_sgd_step(g_acc, net.model));
    for (int64_t r = 0; r < g_world; ++r) replicas[static_cast<size_t>(r)]->micro_step(nullptr, (step * g_world + r) * kRows, kRows);
    if ((step + 1) % kEvery == 0) average_replicas(replicas);
    expect_matches_replica(("step " + std::to_string(step)).c_str());
  }
  // After step 5 (not a multiple of 2) the processes differ until the end averages them.
  if (g_world > 1) EXPECT_NE(replicas[0]->weight(), replicas[1]->weight());
  ACC_ASSERT_OK(acc_local_sgd_end(g_acc, net.model));
  average_replicas(replicas);
  expect_matches_replica("the end");
  // Outside the scope DDP averages gradients again: one more step leaves every process equal.
  net.micro_step(g_acc, g_rank * kRows, kRows);
  acc_tensor* mine = floats(net.weight(), {6});
  acc_tensor* all = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, mine, "local sgd weights", &all));
  const auto gathered = to_floats(all);
  for (int64_t r = 1; r < g_world; ++r)
    EXPECT_EQ(std::vector<float>(gathered.begin() + r * 6, gathered.begin() + (r + 1) * 6), net.weight()) << r;
  acc_tensor_free(mine);
  acc_tensor_free(all);
}

// Accelerate's profile() on every process: each writes profile_<its index>.json, and the end waits
// for everyone, so that once any process is past it every trace is there. Each trace is its own
// process's: it holds the rows of the batch that process trained on.
TEST(Profile, EveryProcessWritesItsOwnTraceBeforeAnyGoesOn) {
  const std::string dir = std::string("/tmp/acc_dist_profile_") + std::getenv("MASTER_PORT");
  Net net(0.1, false);
  ACC_ASSERT_OK(acc_prepare(g_acc, &net.model, &net.opt, nullptr, nullptr));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "record_shapes", 1));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", dir.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(g_acc, o));
  acc_options_free(o);
  if (g_rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last to write
  net.micro_step(g_acc, 0, 2 + g_rank);
  ACC_ASSERT_OK(acc_profile_end(g_acc));
  for (int64_t r = 0; r < g_world; ++r) {
    const std::string path = dir + "/profile_" + std::to_string(r) + ".json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is not there after the end on process " << g_rank;
    std::ifstream in(path);
    const auto trace = nlohmann::json::parse(in);
    bool found_batch = false;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("name", "") == "aten::addmm") found_batch = found_batch || e["args"]["Input Dims"][1][0] == 2 + r;
    }
    EXPECT_TRUE(found_batch) << path << " does not hold process " << r << "'s forward";
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

namespace {

// Processes that disagree are told so on every process before any collective pairs wrongly (Gloo
// aborted a process, or handed garbage on).
TEST(Dist, ProcessesWithOtherSettingsOrModelsAreRefusedOnEveryProcess) {
  acc_accelerator* other = nullptr;
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"ddp_bucket_cap_mb", std::to_string(25 + (g_rank == 1 ? 1 : 0))},
                                                 {"zero_stage", g_rank == g_world - 1 ? "3" : "0"}},
                                                &other),
                   ACC_ERR_INVALID_ARGUMENT, "every process of a job must have the same training settings");
  const std::string message = acc_last_error_message();
  EXPECT_NE(message.find("process 0 has zero_stage=0, process " + std::to_string(g_world - 1) + " zero_stage=3"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("process 0 has ddp_bucket_cap_mb=25, process 1 ddp_bucket_cap_mb=26"), std::string::npos)
      << message;
  EXPECT_EQ(other, nullptr);

  // A hidden layer of another width on the last process.
  const std::string width = std::to_string(g_rank == g_world - 1 ? 17 : 16);
  const std::string spec = R"([{"type":"linear","in_features":3,"out_features":)" + width +
                           R"(},{"type":"tanh"},{"type":"linear","in_features":)" + width + R"(,"out_features":2}])";
  for (const char* stage : {"0", "1", "2", "3"}) {
    SCOPED_TRACE(std::string("zero_stage ") + stage);
    acc_accelerator* acc = acc_test::make_accelerator({{"zero_stage", stage}});
    acc_model* model = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(spec.c_str(), &model));
    acc_model* prepared = nullptr;
    ACC_EXPECT_ERROR(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared), ACC_ERR_INVALID_ARGUMENT,
                     "every process must prepare the same model");
    EXPECT_NE(std::string(acc_last_error_message()).find("parameter 0.weight [" + width), std::string::npos)
        << acc_last_error_message();
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  // Still in step.
  acc_tensor* one = floats({1.0f}, {1});
  acc_tensor* sum = nullptr;
  ACC_ASSERT_OK(acc_reduce(g_acc, one, ACC_REDUCTION_SUM, "after the refusals", &sum));
  EXPECT_EQ(to_floats(sum), std::vector<float>{static_cast<float>(g_world)});
  acc_tensor_free(one);
  acc_tensor_free(sum);
}

}  // namespace

namespace {

// A model of two linear layers (4 -> 6 -> 3) with EVA's adapters drawn (r 2, the same seed on
// every process), its lora_A values after EVA on `rows` (samples x 4, batches of `batch` in order)
// with `acc` (null: this process alone).
std::vector<float> eva_lora_a(const std::vector<float>& rows, int64_t batch, acc_accelerator* acc) {
  EXPECT_EQ(acc_set_seed(17), ACC_OK);
  acc_model* m = acc_test::spec_model(R"([{"type":"linear","in_features":4,"out_features":6},{"type":"tanh"},
                                         {"type":"linear","in_features":6,"out_features":3}])");
  acc_options* o = acc_test::lora_options(2, 4);
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "eva"), ACC_OK);
  EXPECT_EQ(acc_model_add_lora(m, "0,2", o, nullptr), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  acc_tensor* x = acc_test::floats(rows, {static_cast<int64_t>(rows.size() / 4), 4});
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(&x, 1, &ds), ACC_OK);
  acc_tensor_free(x);
  acc_options* lo = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &lo), ACC_OK);
  EXPECT_EQ(acc_options_set_int(lo, "batch_size", batch), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, lo, &dl), ACC_OK);
  EXPECT_EQ(acc_model_initialize_lora_eva(m, dl, nullptr, acc, nullptr), ACC_OK) << acc_last_error_message();
  std::vector<float> out;
  for (const std::string& name : acc_test::parameter_names(m))
    if (name.size() > 14 && name.compare(name.size() - 14, 14, ".lora_A.weight") == 0) {
      const auto values = weights(m, name.c_str());
      out.insert(out.end(), values.begin(), values.end());
    }
  acc_options_free(lo);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_model_free(m);
  return out;
}

}  // namespace

// PEFT's gather_distributed_inputs: each process reads its part of every batch, and EVA's
// components are those of one process reading the whole batches (the rows in rank order).
TEST(Training, EvaGathersEveryProcesssLayerInputs) {
  const int64_t batch = 3, steps = 4, world = g_world;
  std::vector<float> all, mine;
  for (int64_t step = 0; step < steps; ++step)
    for (int64_t rank = 0; rank < world; ++rank)
      for (int64_t row = 0; row < batch; ++row)
        for (int64_t f = 0; f < 4; ++f) {
          const int64_t i = ((step * world + rank) * batch + row) * 4 + f;
          const float v = std::sin(0.7f * static_cast<float>(i)) + 0.1f * static_cast<float>(f * (i % 5));
          all.push_back(v);
          if (rank == g_rank) mine.push_back(v);
        }
  const std::vector<float> alone = eva_lora_a(all, batch * world, nullptr);
  const std::vector<float> gathered = eva_lora_a(mine, batch, g_acc);
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(gathered, alone);
}

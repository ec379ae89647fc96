// LOMO under DDP: each gradient is averaged over the processes as DDP averages it (divided by the
// number of processes, then summed) before its update inside backward, so Lomo without weight decay
// steps as SGD under DDP does and every replica takes the same update (Python Accelerate leaves LOMO
// to DDP's Reducer, which averages only after each process applied its own gradient). Sharded data
// parallelism is refused.
#include <cmath>
#include <string>
#include <vector>

#include "../capi/support.h"
#include "job.h"

using acc_test::floats;
using acc_test::to_floats;

namespace {

const char* kParams[] = {"0.weight", "0.bias", "2.weight", "2.bias"};

// Batch `step` of the whole job (8 rows per process), and this process's rows of it.
std::pair<std::vector<float>, std::vector<float>> own_rows(int step) {
  std::vector<float> x, y;
  for (int64_t i = g_rank * 8; i < (g_rank + 1) * 8; ++i) {
    for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.9f * static_cast<float>(i * 3 + f + step)));
    for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.4f * static_cast<float>(i + f * step)));
  }
  return {x, y};
}

acc_tensor* loss_on_own_rows(acc_model* model, int step) {
  auto [x, y] = own_rows(step);
  acc_tensor* xt = floats(x, {8, 3});
  acc_tensor* yt = floats(y, {8, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  yt = acc_test::on_device_of(out, yt);
  EXPECT_EQ(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  for (acc_tensor* t : {xt, yt, out}) acc_tensor_free(t);
  return loss;
}

// A prepared model of the job's network (the same initial weights on every process) and optimizer.
void prepare(acc_accelerator* acc, const char* algorithm, acc_model** model, acc_optimizer** opt) {
  ASSERT_EQ(acc_set_seed(23), ACC_OK);
  ASSERT_EQ(acc_model_from_spec(kDistNet, model), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_optimizer_create(*model, algorithm, nullptr, opt), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_prepare(acc, model, opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
}

// Whether every process holds exactly this process's values of every parameter.
void expect_replicas_equal(acc_accelerator* acc, acc_model* model) {
  for (const char* name : kParams) {
    acc_tensor *w = nullptr, *all = nullptr;
    ASSERT_EQ(acc_model_parameter(model, name, &w), ACC_OK);
    ASSERT_EQ(acc_gather(acc, w, "LOMO replicas", &all), ACC_OK) << acc_last_error_message();
    const auto gathered = to_floats(all);
    const size_t per = gathered.size() / static_cast<size_t>(g_world);
    for (size_t i = per; i < gathered.size(); ++i) ASSERT_EQ(gathered[i], gathered[i % per]) << name << "[" << i << "]";
    acc_tensor_free(w);
    acc_tensor_free(all);
  }
}

}  // namespace

TEST(DdpLomo, EveryReplicaTakesTheAveragedUpdateAsSgdUnderDdp) {
  acc_accelerator* acc = acc_test::make_accelerator({});
  constexpr double kRate = 0.3;
  constexpr int kSteps = 4;
  // SGD under DDP first: while a LOMO optimizer is prepared, a plain backward is refused.
  acc_model* sgd_model = nullptr;
  acc_optimizer* sgd = nullptr;
  prepare(acc, "sgd", &sgd_model, &sgd);
  ASSERT_EQ(acc_optimizer_set_lr(sgd, 0, kRate), ACC_OK);
  for (int step = 0; step < kSteps; ++step) {
    acc_tensor* loss = loss_on_own_rows(sgd_model, step);
    ACC_ASSERT_OK(acc_backward(acc, loss));
    ACC_ASSERT_OK(acc_optimizer_step(sgd));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(sgd));
    acc_tensor_free(loss);
  }
  std::vector<std::vector<float>> sgd_weights;
  for (const char* name : kParams) sgd_weights.push_back(weights(sgd_model, name));
  acc_optimizer_free(sgd);
  acc_model_free(sgd_model);

  acc_model* model = nullptr;
  acc_optimizer* lomo = nullptr;
  prepare(acc, "lomo", &model, &lomo);
  for (int step = 0; step < kSteps; ++step) {
    acc_tensor* loss = loss_on_own_rows(model, step);
    ACC_ASSERT_OK(acc_lomo_backward(acc, loss, kRate));
    acc_tensor_free(loss);
  }
  expect_replicas_equal(acc, model);
  // Two processes add two values, whatever the grouping: bit for bit. More processes add in an
  // order that depends on how the values are grouped (DDP's one bucket, LOMO's one parameter).
  for (size_t p = 0; p < std::size(kParams); ++p) {
    const auto got = weights(model, kParams[p]);
    for (size_t i = 0; i < got.size(); ++i) {
      if (g_world == 2)
        EXPECT_EQ(got[i], sgd_weights[p][i]) << kParams[p] << "[" << i << "]";
      else
        EXPECT_NEAR(got[i], sgd_weights[p][i], 1e-6) << kParams[p] << "[" << i << "]";
    }
  }
  acc_optimizer_free(lomo);
  acc_model_free(model);

  // AdaLomo's moments come from the averaged gradients too: the replicas stay equal.
  prepare(acc, "adalomo", &model, &lomo);
  const auto initial = weights(model, "0.weight");
  for (int step = 0; step < kSteps; ++step) {
    acc_tensor* loss = loss_on_own_rows(model, step);
    ACC_ASSERT_OK(acc_backward_lr(acc, loss, 0.05));
    acc_tensor_free(loss);
  }
  EXPECT_NE(weights(model, "0.weight"), initial);
  expect_replicas_equal(acc, model);
  acc_optimizer_free(lomo);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

// Inside no_sync each process applies its own gradients (LocalSGD builds on that); a backward after
// trigger_sync_in_backward averages again. join_uneven_inputs has nothing to stand in for LOMO's
// per-parameter allreduces on a process whose data ended: refused.
TEST(DdpLomo, NoSyncStepsEachReplicaOnItsOwnGradients) {
  if (g_world < 2) GTEST_SKIP() << "needs several processes";
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* model = nullptr;
  acc_optimizer* lomo = nullptr;
  prepare(acc, "lomo", &model, &lomo);
  ACC_EXPECT_ERROR(acc_join_uneven_inputs_begin(acc, model, -1), ACC_ERR_UNSUPPORTED,
                   "join_uneven_inputs with a LOMO optimizer");
  ACC_ASSERT_OK(acc_no_sync_begin(acc, model));
  acc_tensor* loss = loss_on_own_rows(model, 0);
  ACC_ASSERT_OK(acc_lomo_backward(acc, loss, 0.3));
  acc_tensor_free(loss);
  acc_tensor *w = nullptr, *all = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(model, "2.bias", &w));
  ACC_ASSERT_OK(acc_gather(acc, w, "local LOMO steps", &all));
  const auto gathered = to_floats(all);
  EXPECT_NE(std::vector<float>(gathered.begin(), gathered.begin() + 2),
            std::vector<float>(gathered.begin() + 2, gathered.begin() + 4))
      << "processes on their own rows stepped alike under no_sync";
  acc_tensor_free(w);
  acc_tensor_free(all);
  // After the trigger, the update is the average again: the replicas move by the same amount.
  const auto before = weights(model, "2.bias");
  loss = loss_on_own_rows(model, 1);
  ACC_ASSERT_OK(acc_trigger_sync_in_backward(acc, model));
  ACC_ASSERT_OK(acc_lomo_backward(acc, loss, 0.3));
  acc_tensor_free(loss);
  const auto after = weights(model, "2.bias");
  std::vector<float> moved = {after[0] - before[0], after[1] - before[1]};
  acc_tensor* delta = floats(moved, {2});
  ACC_ASSERT_OK(acc_gather(acc, delta, "averaged LOMO steps", &all));
  const auto deltas = to_floats(all);
  for (size_t i = 2; i < deltas.size(); ++i) EXPECT_NEAR(deltas[i], deltas[i % 2], 1e-6) << i;
  acc_tensor_free(delta);
  acc_tensor_free(all);
  ACC_ASSERT_OK(acc_no_sync_end(acc, model));
  acc_optimizer_free(lomo);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

// DDP's buffers (BatchNorm's running statistics) go from process 0 at the forward after one whose
// gradients were averaged, LOMO's averaging included: an evaluation after training starts from
// process 0's statistics, as after DDP's.
TEST(DdpLomo, BuffersAreBroadcastAsAfterDdpsAveraging) {
  if (g_world < 2) GTEST_SKIP() << "needs several processes";
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* model = nullptr;
  acc_optimizer* lomo = nullptr;
  ASSERT_EQ(acc_set_seed(23), ACC_OK);
  ASSERT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":4},
                                    {"type":"batchnorm1d","num_features":4},
                                    {"type":"linear","in_features":4,"out_features":2}])",
                                &model),
            ACC_OK);
  ASSERT_EQ(acc_optimizer_create(model, "lomo", nullptr, &lomo), ACC_OK);
  ASSERT_EQ(acc_prepare(acc, &model, &lomo, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  for (int step = 0; step < 2; ++step) {
    acc_tensor* loss = loss_on_own_rows(model, step);
    ACC_ASSERT_OK(acc_lomo_backward(acc, loss, 0.1));
    acc_tensor_free(loss);
  }
  ACC_ASSERT_OK(acc_model_set_training(model, 0));
  acc_tensor* x = floats({0.5f, -1.0f, 2.0f}, {1, 3});
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &y));
  acc_tensor_list* state = nullptr;
  acc_tensor *mean = nullptr, *all = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &state));
  ACC_ASSERT_OK(acc_tensor_list_find(state, "1.running_mean", &mean));
  ACC_ASSERT_OK(acc_gather(acc, mean, "running means", &all));
  const auto gathered = to_floats(all);
  for (size_t i = 4; i < gathered.size(); ++i) EXPECT_EQ(gathered[i], gathered[i % 4]) << i;
  for (acc_tensor* t : {x, y, mean, all}) acc_tensor_free(t);
  acc_tensor_list_free(state);
  acc_optimizer_free(lomo);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(DdpLomo, ShardedDataParallelismIsRefused) {
  acc_accelerator* acc = acc_test::make_accelerator({{"zero_stage", "2"}});
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  ASSERT_EQ(acc_set_seed(23), ACC_OK);
  ASSERT_EQ(acc_model_from_spec(kDistNet, &model), ACC_OK);
  ASSERT_EQ(acc_optimizer_create(model, "adalomo", nullptr, &opt), ACC_OK);
  ACC_EXPECT_ERROR(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                   "the adalomo optimizer under sharded data parallelism (zero_stage 2)");
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

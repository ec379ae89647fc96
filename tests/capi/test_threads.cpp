// One accelerator serving threads that each train their own model: they prepare, step, log and
// end runs at once.
#include <atomic>
#include <thread>
#include <utility>

#include "support.h"

namespace {

constexpr const char* kSpec =
    R"([{"type":"linear","in_features":8,"out_features":16},{"type":"relu"},{"type":"linear","in_features":16,"out_features":2}])";

// A batch of random inputs [4, 8] and targets [4, 2].
std::pair<acc_tensor*, acc_tensor*> random_batch() {
  const int64_t x_dims[] = {4, 8}, y_dims[] = {4, 2};
  acc_tensor *x = nullptr, *y = nullptr;
  EXPECT_EQ(acc_tensor_randn(x_dims, 2, &x), ACC_OK);
  EXPECT_EQ(acc_tensor_randn(y_dims, 2, &y), ACC_OK);
  return {x, y};
}

// One training step of a prepared model on a batch (freed here): the first failure's message, or "".
std::string train_step(acc_accelerator* acc, acc_model* model, acc_optimizer* opt,
                       std::pair<acc_tensor*, acc_tensor*> batch) {
  acc_tensor_list* outputs = nullptr;
  acc_tensor *out = nullptr, *loss = nullptr;
  std::string failure;
  if (acc_model_forward(model, &batch.first, 1, 0, &outputs) != ACC_OK ||
      acc_tensor_list_get(outputs, 0, &out) != ACC_OK ||
      acc_loss_mse(out, batch.second, ACC_REDUCTION_MEAN, &loss) != ACC_OK || acc_backward(acc, loss) != ACC_OK ||
      acc_optimizer_step(opt) != ACC_OK || acc_optimizer_zero_grad(opt) != ACC_OK)
    failure = acc_last_error_message();
  acc_tensor_free(out);
  acc_tensor_free(loss);
  acc_tensor_list_free(outputs);
  acc_tensor_free(batch.first);
  acc_tensor_free(batch.second);
  return failure;
}

}  // namespace

TEST(Threads, PrepareOnOneAcceleratorFromSeveralThreadsAtOnce) {
  // The accelerator's lists of prepared objects were grown by threads at once: heap corruption
  // (SIGSEGV, SIGABRT "pure virtual method called", malloc's own aborts) in one run of five or so.
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300 && failures[t].empty(); ++i) {
        acc_model* model = acc_test::spec_model(kSpec);
        acc_optimizer* opt = acc_test::optimizer(model, "adamw", 1e-3);
        acc_model *prepared_model = nullptr, *again = nullptr;
        acc_optimizer* prepared_opt = nullptr;
        if (acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared_model) != ACC_OK ||
            acc_prepare_optimizer(acc, opt, ACC_PLACEMENT_DEFAULT, &prepared_opt) != ACC_OK ||
            acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &again) != ACC_OK)
          failures[t] = acc_last_error_message();
        else if (i % 50 == 0)
          failures[t] = train_step(acc, prepared_model, prepared_opt, random_batch());
        acc_model_free(again);
        acc_optimizer_free(prepared_opt);
        acc_model_free(prepared_model);
        acc_optimizer_free(opt);
        acc_model_free(model);
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& failure : failures) EXPECT_EQ(failure, "");
  acc_accelerator_free(acc);
}

TEST(Threads, RunsEndAndStartWhileOtherThreadsLog) {
  // The trackers' run was ended under a thread's log: a write to a freed file (SIGSEGV), or a wait
  // for ever on it, in most runs.
  const std::string dir = acc_test::temp_path("threads_trackers");
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl,csv"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run", nullptr));
  std::atomic<bool> stop{false};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> loggers;
  for (int t = 0; t < 3; ++t)
    loggers.emplace_back([&] {
      while (!stop) {
        const acc_status s = acc_log_scalar(acc, "loss", 0.5, -1);
        if (s != ACC_OK && s != ACC_ERR_NOT_INITIALIZED) ++unexpected;  // between runs: not started
      }
    });
  for (int run = 0; run < 100; ++run) {
    EXPECT_EQ(acc_end_training(acc), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_init_trackers(acc, "run", nullptr), ACC_OK) << acc_last_error_message();
  }
  stop = true;
  for (auto& t : loggers) t.join();
  EXPECT_EQ(acc_end_training(acc), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(unexpected.load(), 0);
  acc_accelerator_free(acc);
}

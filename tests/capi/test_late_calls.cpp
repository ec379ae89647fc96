// Calls from where a C program's own clean-up runs: a pthread key's destructor and an exit handler
// (both run after the thread's C++ thread-locals are gone), and a forked child's exit(), which must
// not write the parent's buffered tracker records into its files again.
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "support.h"

namespace {

constexpr const char* kChildVariable = "ACC_TEST_LATE_CALLS_CHILD";

// A sum through the C API; exits the process with `code` where it fails (the parent reads it).
void sum_or_exit(int code) {
  const int64_t dims[] = {4};
  acc_tensor *t = nullptr, *s = nullptr;
  if (acc_tensor_randn(dims, 1, &t) != ACC_OK || acc_tensor_sum(t, &s) != ACC_OK) _exit(code);
  acc_tensor_free(s);
  acc_tensor_free(t);
  // An error's message is per-thread state too.
  if (acc_tensor_sum(nullptr, &s) != ACC_ERR_INVALID_ARGUMENT && acc_last_error_message()[0] == '\0') _exit(code);
}

void at_exit() { sum_or_exit(4); }

pthread_key_t g_key;

void* worker(void*) {
  sum_or_exit(5);
  pthread_setspecific(g_key, reinterpret_cast<void*>(1));  // its destructor runs at the thread's end
  return nullptr;
}

}  // namespace

// Runs as a child of the test below: exits 0 when every late call worked.
TEST(LateCallsChild, CallsFromKeyDestructorsAndExitHandlers) {
  if (!std::getenv(kChildVariable)) GTEST_SKIP() << "run by LateCalls.KeyDestructorsAndExitHandlersMayCallIn";
  std::atexit(at_exit);
  ASSERT_EQ(pthread_key_create(&g_key, [](void*) { sum_or_exit(6); }), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, nullptr, worker, nullptr), 0);
  pthread_join(thread, nullptr);
  std::exit(0);
}

TEST(LateCalls, KeyDestructorsAndExitHandlersMayCallIn) {
  // (The child's late calls keep per-thread state the thread-locals' end already freed: not leaks.)
  const int status = acc_test::run_self("LateCallsChild.CallsFromKeyDestructorsAndExitHandlers",
                                        {std::string(kChildVariable) + "=1", "ACC_TEST_LEAVES_ACCELERATOR_OPEN=1"});
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "4: an exit handler's call failed, 5: a thread's, 6: a key destructor's";
}

TEST(LateCalls, AForkedChildsExitLeavesTheParentsTrackerFilesAlone) {
  const std::string dir = acc_test::temp_path("late_calls_fork");
  std::filesystem::remove_all(dir);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl,csv"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run", nullptr));
  const char* names[] = {"loss"};
  for (int step = 0; step < 300; ++step) {
    const double value = 0.5 * step;
    ACC_ASSERT_OK(acc_log(acc, names, &value, 1, step));
    if (step % 60 == 0) {  // records still in the writers' buffers are copied into the child
      const pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        // (The parent's objects are the child's too, alive at its exit: not leaks of its own.)
        setenv("ACC_TEST_LEAVES_ACCELERATOR_OPEN", "1", 1);
        std::exit(0);  // exit(), which flushes every stdio stream the child has
      }
      int status = 0;
      waitpid(child, &status, 0);
    }
  }
  ACC_ASSERT_OK(acc_end_training(acc));
  acc_accelerator_free(acc);
  std::istringstream jsonl(acc_test::read_file(dir + "/run/metrics.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(jsonl, line); ++lines) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(record.is_discarded()) << "line " << lines + 1 << ": " << line;
    EXPECT_EQ(record["step"], lines);
  }
  EXPECT_EQ(lines, 300);
  std::istringstream csv(acc_test::read_file(dir + "/run/metrics.csv"));
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 301);  // the header and one row per step
}

// A forked child may end, free and try to iterate what the parent's threads serve (a loader's
// workers, the trackers' writers) without waiting for threads it does not have, threads of its own
// running or not: the loader says so, the rest goes, and the parent's objects carry on.
TEST(LateCalls, AForkedChildNeverWaitsForTheParentsThreads) {
  const std::string dir = acc_test::temp_path("late_calls_fork_threads");
  std::filesystem::remove_all(dir);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run", nullptr));
  acc_tensor* rows = acc_test::floats(std::vector<float>(64, 1.0f), {32, 2});
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(&rows, 1, &ds));
  acc_tensor_free(rows);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
  ACC_ASSERT_OK(acc_options_set_int(o, "num_workers", 2));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
  acc_options_free(o);
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));  // the workers run, waiting for room ahead
  acc_tensor_list_free(batch);
  const char* names[] = {"loss"};
  const double value = 1.0;
  ACC_ASSERT_OK(acc_log(acc, names, &value, 1, 0));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);  // a hang ends as SIGALRM
    // A thread of the child's own first (found by a hunt: the parent's threads' handles then named
    // no thread, or one of the child's, and letting them go aborted the child).
    std::thread([] {}).join();
    acc_tensor_list* in_child = nullptr;
    if (acc_dataloader_next(dl, &in_child) != ACC_ERR_INVALID_ARGUMENT) _exit(3);
    if (acc_log(acc, names, &value, 1, 1) != ACC_ERR_INVALID_ARGUMENT) _exit(4);
    if (acc_end_training(acc) != ACC_OK) _exit(5);
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the loader, 4: logging, 5: end_training";
  // The parent's loader and trackers go on.
  size_t batches = 1;
  while (acc_dataloader_next(dl, &batch) == ACC_OK && batch) {
    acc_tensor_list_free(batch);
    batch = nullptr;
    ++batches;
  }
  EXPECT_EQ(batches, 16u);
  ACC_ASSERT_OK(acc_log(acc, names, &value, 1, 1));
  ACC_ASSERT_OK(acc_end_training(acc));
  std::istringstream jsonl(acc_test::read_file(dir + "/run/metrics.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(jsonl, line);) ++lines;
  EXPECT_EQ(lines, 2);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_accelerator_free(acc);
}

namespace {

// The text of every MLflow run's meta.yaml under `dir`, and the zip files there.
std::string mlflow_run_metas(const std::string& dir) {
  std::string metas;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.path().filename() == "meta.yaml") {
      const std::string text = acc_test::read_file(entry.path().string());
      if (text.find("run_uuid") != std::string::npos) metas += text;
    }
  return metas;
}
size_t zip_files(const std::string& dir) {
  size_t zips = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    zips += entry.path().extension() == ".zip";
  return zips;
}

}  // namespace

// A forked child that ends training or frees its copy of the accelerator leaves the parent's runs
// open (found by a hunt: its MLflow run was marked FINISHED, its ClearML session zipped, while the
// parent trained on), and cannot start runs with the parent's trackers.
TEST(LateCalls, AForkedChildLeavesTheParentsRunsOpen) {
  const std::string dir = acc_test::temp_path("late_calls_fork_runs");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  acc_test::ScopedEnv uri("MLFLOW_TRACKING_URI", nullptr), cache("CLEARML_CACHE_DIR", (dir + "/clearml").c_str()),
      offline("CLEARML_OFFLINE_MODE", "1"), mode("WANDB_MODE", "offline"), wandb("WANDB_DIR", dir.c_str());
  acc_accelerator* acc = acc_test::make_accelerator(
      {{"cpu", "true"}, {"log_with", "mlflow,clearml,wandb,tensorboard,jsonl"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run", nullptr));
  const char* names[] = {"loss"};
  const double value = 1.0;
  ACC_ASSERT_OK(acc_log(acc, names, &value, 1, 0));
  ASSERT_NE(mlflow_run_metas(dir).find("status: 1"), std::string::npos) << "RUNNING";
  for (const bool end_first : {true, false}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      alarm(30);
      if (end_first && acc_end_training(acc) != ACC_OK) _exit(3);
      if (acc_init_trackers(acc, "again", nullptr) != ACC_ERR_INVALID_ARGUMENT) _exit(4);
      if (std::string(acc_last_error_message()).find("is a fork") == std::string::npos) _exit(5);
      acc_accelerator_free(acc);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: end_training, 4 and 5: init_trackers";
    const std::string metas = mlflow_run_metas(dir);
    EXPECT_NE(metas.find("status: 1"), std::string::npos) << metas;
    EXPECT_EQ(metas.find("status: 3"), std::string::npos) << metas;
    EXPECT_EQ(zip_files(dir), 0u);
  }
  ACC_ASSERT_OK(acc_log(acc, names, &value, 1, 1));
  ACC_ASSERT_OK(acc_end_training(acc));
  EXPECT_NE(mlflow_run_metas(dir).find("status: 3"), std::string::npos) << "FINISHED by the parent";
  EXPECT_EQ(zip_files(dir), 1u);
  acc_accelerator_free(acc);
}

// A child forked while other threads are inside the library finds the library usable (found by
// hunts: the handle registry's lock, torch's generator's while a thread drew or seeded, and the
// trackers' while a thread logged stayed taken in the child, which hung on its first handle, its
// first draw (a new model's initialisation) or its end of training).
TEST(LateCalls, AChildForkedWhileAnotherThreadCallsInIsUsable) {
  const std::string dir = acc_test::fresh_dir("late_calls_fork_busy");
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run", nullptr));
  std::atomic<bool> stop{false};
  const int64_t dims[] = {4, 4};
  std::thread busy([&] {
    for (uint64_t i = 0; !stop; ++i) {
      acc_tensor* t = nullptr;
      if (acc_tensor_zeros(dims, 2, ACC_DTYPE_FLOAT32, nullptr, &t) == ACC_OK) acc_tensor_free(t);
      if (acc_tensor_rand(dims, 2, &t) == ACC_OK) acc_tensor_free(t);
      (void)acc_set_seed(i % 1000);
    }
  });
  std::thread logging([&] {
    const char* names[] = {"loss"};
    const double value = 0.5;
    for (int64_t step = 0; !stop; ++step) (void)acc_log(acc, names, &value, 1, step);
  });
  for (int round = 0; round < 30; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      alarm(20);  // a hang ends as SIGALRM
      acc_tensor* t = nullptr;
      if (acc_tensor_zeros(dims, 2, ACC_DTYPE_FLOAT32, nullptr, &t) != ACC_OK) _exit(3);
      acc_tensor_free(t);
      if (acc_tensor_rand(dims, 2, &t) != ACC_OK) _exit(4);
      acc_tensor_free(t);
      const char* names[] = {"loss"};
      const double value = 1.0;
      if (acc_log(acc, names, &value, 1, 0) != ACC_ERR_INVALID_ARGUMENT) _exit(5);
      if (std::string(acc_last_error_message()).find("is a fork") == std::string::npos) _exit(6);
      if (acc_end_training(acc) != ACC_OK) _exit(7);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "round " << round << ": the child ended by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ASSERT_EQ(WEXITSTATUS(status), 0) << "round " << round << " (3, 4: a tensor; 5, 6: log; 7: end_training)";
  }
  stop = true;
  busy.join();
  logging.join();
  ACC_ASSERT_OK(acc_end_training(acc));
  acc_accelerator_free(acc);
}

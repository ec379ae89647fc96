// Multi-process tests, run by CTest through accelerate-launch on 2-4 processes (Gloo on loopback).
// Every process runs the same tests in the same order; they use only the C API.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelerate.h"
#include "../capi/support.h"
#include "job.h"

using acc_test::floats;
using acc_test::longs;
using acc_test::to_floats;

acc_accelerator* g_acc = nullptr;
int64_t g_rank = 0, g_world = 1;

// The accelerator every test shares, its options from ACC_TEST_* variables.
void create_global_accelerator();

namespace {

class AcceleratorEnvironment : public testing::Environment {
 public:
  void SetUp() override { create_global_accelerator(); }
  void TearDown() override { acc_accelerator_free(g_acc); }
};

}  // namespace

void create_global_accelerator() {
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o), ACC_OK);
  if (const char* timeout = std::getenv("ACC_TEST_TIMEOUT"))
    ASSERT_EQ(acc_options_set(o, "timeout_seconds", timeout), ACC_OK);
  if (const char* hook = std::getenv("ACC_TEST_COMM_HOOK")) ASSERT_EQ(acc_options_set(o, "ddp_comm_hook", hook), ACC_OK);
  if (const char* state = std::getenv("ACC_TEST_COMM_STATE"))
    ACC_ASSERT_OK(acc_options_set_string(o, "ddp_comm_state_option", state));
  if (std::getenv("ACC_TEST_GRADIENT_AS_BUCKET_VIEW"))
    ACC_ASSERT_OK(acc_options_set_bool(o, "ddp_gradient_as_bucket_view", 1));
  if (std::getenv("ACC_TEST_STATIC_GRAPH")) ACC_ASSERT_OK(acc_options_set_bool(o, "ddp_static_graph", 1));
  // The GPU suite (tests/gpu) runs these tests on a GPU: ACC_TEST_BACKEND picks the process
  // group's backend ("gloo" lets 2 processes share one GPU), ACC_TEST_USE_GPU=1 requires the
  // accelerator to be on CUDA (so that they cannot pass on the CPU instead), 0 keeps it on the CPU.
  if (const char* backend = std::getenv("ACC_TEST_BACKEND")) ACC_ASSERT_OK(acc_options_set(o, "backend", backend));
  const char* use_gpu = std::getenv("ACC_TEST_USE_GPU");
  if (use_gpu && std::string(use_gpu) == "0") ACC_ASSERT_OK(acc_options_set(o, "cpu", "true"));
  ACC_ASSERT_OK(acc_accelerator_create(o, &g_acc));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_accelerator_process_index(g_acc, &g_rank));
  ACC_ASSERT_OK(acc_accelerator_num_processes(g_acc, &g_world));
  if (use_gpu && std::string(use_gpu) == "1") {
    char* device = nullptr;
    ACC_ASSERT_OK(acc_accelerator_device(g_acc, &device));
    const std::string name = device ? device : "";
    acc_string_free(device);
    ASSERT_EQ(name.rfind("cuda", 0), 0u) << "ACC_TEST_USE_GPU=1 but the accelerator runs on " << name;
    const char* type = nullptr;
    ACC_ASSERT_OK(acc_accelerator_distributed_type(g_acc, &type));
    ASSERT_STREQ(type, g_world > 1 ? "MULTI_GPU" : "NO");
  }
  // A fault test's failing process must not leave before every process has its group: Gloo lets a
  // process finish connecting while a peer is still connecting to it, which the peer would see as
  // a failed creation, not as the fault under test.
  if (std::getenv("ACC_TEST_FAULT")) ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
}

namespace {

// Every process frees its accelerator (the process group goes with the last) and creates one
// again: the new group meets, also where the launcher's store (which outlives the group) still
// holds the keys of the first.
TEST(Dist, AGroupLeftByAllAndJoinedAgainMeets) {
  acc_accelerator_free(g_acc);
  g_acc = nullptr;
  // The last process comes late: the others must not take the first group's keys for its.
  if (g_rank == g_world - 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  create_global_accelerator();
  ASSERT_NE(g_acc, nullptr);
  acc_tensor* one = floats({1.0f}, {1});
  acc_tensor* sum = nullptr;
  ACC_ASSERT_OK(acc_reduce(g_acc, one, ACC_REDUCTION_SUM, "after joining again", &sum));
  EXPECT_EQ(to_floats(sum), std::vector<float>{static_cast<float>(g_world)});
  acc_tensor_free(one);
  acc_tensor_free(sum);
}

// Gradients compressed to 16 bits on the wire agree with fp32 ones to about 3 significant digits.
double weight_tolerance() { return std::getenv("ACC_TEST_COMM_HOOK") ? 2e-3 : 1e-5; }

std::vector<float> range_values(int64_t n, float start, float step = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// Inputs and targets of the whole job for a step; each process takes rows [rank*8, rank*8+8).
std::pair<std::vector<float>, std::vector<float>> job_batch(int step) {
  std::vector<float> x, y;
  for (int64_t i = 0; i < 8 * g_world; ++i) {
    for (int f = 0; f < 3; ++f) x.push_back(std::sin(0.7f * static_cast<float>(i * 3 + f + step)));
    for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.3f * static_cast<float>(i + f * step)));
  }
  return {x, y};
}

// train_step with the job's accelerator (use_accelerator_backward) or a plain backward.
void train_step(acc_model* model, acc_optimizer* opt, const std::vector<float>& x, const std::vector<float>& y,
                int64_t rows, bool use_accelerator_backward) {
  train_step(model, opt, x, y, rows, use_accelerator_backward ? g_acc : nullptr);
}

std::vector<float> rows_of(const std::vector<float>& v, int64_t width, int64_t begin, int64_t count) {
  return std::vector<float>(v.begin() + begin * width, v.begin() + (begin + count) * width);
}

// A dataset whose samples are their own ids 0..n-1.
acc_dataset* id_dataset(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  acc_tensor* t = longs(ids, {n});
  const acc_tensor* fields[] = {t};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 1, &ds), ACC_OK);
  acc_tensor_free(t);
  return ds;
}

// A loader of batch_size over ds (shuffling or not), prepared by `acc` (the job's accelerator by default).
acc_dataloader* prepared_loader(acc_dataset* ds, int64_t batch_size, acc_accelerator* acc = g_acc,
                                bool shuffle = false) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "batch_size", batch_size), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "shuffle", shuffle ? 1 : 0), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK);
  EXPECT_EQ(acc_prepare(acc, nullptr, nullptr, &dl, nullptr), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return dl;
}

// One epoch of a prepared loader through gather_for_metrics, concatenated (field 0 holds sample ids).
std::vector<int64_t> gather_epoch(acc_dataloader* dl, const char* name, acc_accelerator* acc = g_acc) {
  std::vector<int64_t> gathered;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
    if (!batch) break;
    acc_tensor *b = nullptr, *all = nullptr;
    EXPECT_EQ(acc_tensor_list_get(batch, 0, &b), ACC_OK);
    EXPECT_EQ(acc_gather_for_metrics(acc, b, name, &all), ACC_OK) << acc_last_error_message();
    const auto v = acc_test::to_longs(all);
    gathered.insert(gathered.end(), v.begin(), v.end());
    acc_tensor_free(b);
    acc_tensor_free(all);
    acc_tensor_list_free(batch);
  }
  return gathered;
}

// After a refused collective, the processes are still in step: a sum over all of them comes out whole.
void expect_still_in_step(const char* name) {
  acc_tensor* one = floats({1.0f}, {1});
  acc_tensor* out = nullptr;
  ACC_ASSERT_OK(acc_reduce(g_acc, one, ACC_REDUCTION_SUM, name, &out));
  EXPECT_EQ(to_floats(out), std::vector<float>{static_cast<float>(g_world)});
  acc_tensor_free(out);
  acc_tensor_free(one);
}

}  // namespace

TEST(Dist, PropertiesComeFromTheLauncher) {
  const char* type = nullptr;
  ACC_ASSERT_OK(acc_accelerator_distributed_type(g_acc, &type));
  EXPECT_STREQ(type, "MULTI_CPU");
  EXPECT_EQ(g_rank, std::atoll(std::getenv("RANK")));
  EXPECT_EQ(g_world, std::atoll(std::getenv("WORLD_SIZE")));
  int main = -1, last = -1;
  ACC_ASSERT_OK(acc_accelerator_is_main_process(g_acc, &main));
  ACC_ASSERT_OK(acc_accelerator_is_last_process(g_acc, &last));
  EXPECT_EQ(main, g_rank == 0);
  EXPECT_EQ(last, g_rank == g_world - 1);
  // Per machine (node): the local rank, and a local main process on each.
  int64_t local = -1;
  int local_main = -1;
  ACC_ASSERT_OK(acc_accelerator_local_process_index(g_acc, &local));
  ACC_ASSERT_OK(acc_accelerator_is_local_main_process(g_acc, &local_main));
  EXPECT_EQ(local, std::atoll(std::getenv("LOCAL_RANK")));
  EXPECT_EQ(local_main, local == 0);
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
}

// A progress display shows on each machine's first process, as Accelerate's tqdm (local_process_index
// 0): on the job's main process alone, a second machine showed none.
TEST(Dist, EachMachinesFirstProcessShowsTheProgress) {
  const std::string path = "/tmp/acc_dist_progress_" + std::to_string(::getpid());
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(file, 0);
  ::dup2(file, STDOUT_FILENO);
  acc_progress* p = nullptr;
  acc_status status = acc_progress_create(g_acc, 4, "epoch 1", &p);
  for (int i = 0; i < 4 && status == ACC_OK; ++i) status = acc_progress_update(p, 1);
  if (status == ACC_OK) status = acc_progress_close(p);
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  ::close(file);
  ACC_ASSERT_OK(status);
  acc_progress_free(p);
  int64_t local = -1;
  ACC_ASSERT_OK(acc_accelerator_local_process_index(g_acc, &local));
  const std::string shown = acc_test::read_file(path);
  std::remove(path.c_str());
  EXPECT_EQ(shown.find("epoch 1") != std::string::npos, local == 0) << "process " << g_rank << ": " << shown;
}

// Gloo writes to its peers without MSG_NOSIGNAL: with SIGPIPE's default action a process whose peer
// had gone died silently (exit 141) instead of getting an aborted collective. The accelerator of a
// multi-process job ignores it, as Python does.
TEST(Dist, APeerGoneIsAnErrorNotASigpipe) {
  struct sigaction current {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
}

TEST(Dist, ReduceAsInAccelerateDocs) {
  // tensor = arange(P) + 1 + 2 * rank; the sum over ranks of element i is P (i + 1) + P (P - 1).
  acc_tensor* t = floats(range_values(g_world, 1.0f + 2.0f * static_cast<float>(g_rank)), {g_world});
  acc_tensor *sum = nullptr, *mean = nullptr, *none = nullptr;
  ACC_ASSERT_OK(acc_reduce(g_acc, t, ACC_REDUCTION_SUM, "reduce sum", &sum));
  ACC_ASSERT_OK(acc_reduce(g_acc, t, ACC_REDUCTION_MEAN, nullptr, &mean));
  ACC_ASSERT_OK(acc_reduce(g_acc, t, ACC_REDUCTION_NONE, nullptr, &none));
  auto s = to_floats(sum), m = to_floats(mean);
  for (int64_t i = 0; i < g_world; ++i) {
    const float expected = static_cast<float>(g_world * (i + 1) + g_world * (g_world - 1));
    EXPECT_FLOAT_EQ(s[i], expected);
    EXPECT_FLOAT_EQ(m[i], expected / static_cast<float>(g_world));
  }
  EXPECT_EQ(to_floats(none), to_floats(t));
  for (acc_tensor* x : {t, sum, mean, none}) acc_tensor_free(x);
}

TEST(Dist, GatherConcatenatesInRankOrder) {
  acc_tensor* t = floats({static_cast<float>(g_rank), static_cast<float>(g_rank) + 0.5f}, {1, 2});
  acc_tensor* all = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, t, "gather", &all));
  int64_t dims[2];
  size_t ndim = 0;
  ACC_ASSERT_OK(acc_tensor_shape(all, dims, 2, &ndim));
  EXPECT_EQ(dims[0], g_world);
  auto v = to_floats(all);
  for (int64_t r = 0; r < g_world; ++r) EXPECT_EQ(v[r * 2 + 1], static_cast<float>(r) + 0.5f);
  acc_tensor_free(t);
  acc_tensor_free(all);
}

TEST(Dist, GatherObjectKeepsBytesAndSizes) {
  std::string mine = "rank " + std::to_string(g_rank) + std::string(1, '\0') + std::string(g_rank, 'x');
  acc_string_list* all = nullptr;
  ACC_ASSERT_OK(acc_gather_object(g_acc, mine.data(), mine.size(), "objects", &all));
  size_t n = 0;
  ACC_ASSERT_OK(acc_string_list_size(all, &n));
  ASSERT_EQ(n, static_cast<size_t>(g_world));
  for (int64_t r = 0; r < g_world; ++r) {
    const void* data = nullptr;
    size_t size = 0;
    ACC_ASSERT_OK(acc_string_list_get_bytes(all, r, &data, &size));
    EXPECT_EQ(std::string(static_cast<const char*>(data), size),
              "rank " + std::to_string(r) + std::string(1, '\0') + std::string(r, 'x'));
  }
  acc_string_list_free(all);
}

TEST(Dist, DeviceSpecificSeedsGiveEachProcessItsOwnStream) {
  auto draws = [](acc_status seeded) {
    EXPECT_EQ(seeded, ACC_OK) << acc_last_error_message();
    const int64_t dims[1] = {4};
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_rand(dims, 1, &t), ACC_OK);
    auto v = to_floats(t);
    acc_tensor_free(t);
    return v;
  };
  // Accelerate's set_seed(100, device_specific=True) is set_seed(100 + process_index).
  EXPECT_EQ(draws(acc_set_seed_with(100, ACC_SEED_DEVICE_SPECIFIC)), draws(acc_set_seed(100 + g_rank)));
  acc_tensor* mine = floats(draws(acc_set_seed_with(100, ACC_SEED_DEVICE_SPECIFIC)), {4});
  acc_tensor* all = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, mine, "device-specific draws", &all));
  const auto gathered = to_floats(all);
  for (int64_t r = 1; r < g_world; ++r)
    EXPECT_NE(std::vector<float>(gathered.begin() + r * 4, gathered.begin() + (r + 1) * 4),
              std::vector<float>(gathered.begin(), gathered.begin() + 4))
        << "process " << r << " drew process 0's numbers";
  EXPECT_EQ(draws(acc_set_seed_with(100, 0)), draws(acc_set_seed(100))) << "without the flag: the same seed";
  ACC_EXPECT_ERROR(acc_set_seed_with(1, 4), ACC_ERR_INVALID_ARGUMENT, "unknown acc_set_seed_with flags 4");
  if (g_rank > 0)
    ACC_EXPECT_ERROR(acc_set_seed_with(UINT64_MAX, ACC_SEED_DEVICE_SPECIFIC), ACC_ERR_INVALID_ARGUMENT,
                     "past 2^64 - 1");
  acc_tensor_free(mine);
  acc_tensor_free(all);
}

TEST(Dist, BroadcastFromTheLastProcess) {
  acc_tensor* t = floats({static_cast<float>(g_rank * 10)}, {1});
  acc_tensor* b = nullptr;
  ACC_ASSERT_OK(acc_broadcast(g_acc, t, g_world - 1, "broadcast", &b));
  EXPECT_EQ(to_floats(b)[0], static_cast<float>((g_world - 1) * 10));
  EXPECT_EQ(to_floats(t)[0], static_cast<float>(g_rank * 10));  // the input is unchanged
  ACC_EXPECT_ERROR(acc_broadcast(g_acc, t, g_world, "broadcast", &b), ACC_ERR_INVALID_ARGUMENT, "source process");
  acc_tensor_free(t);
  acc_tensor_free(b);
}

TEST(Dist, BroadcastObjectGivesEveryProcessTheSourcesBytes) {
  const int64_t src = g_world - 1;
  const std::string sent = "from the last" + std::string(1, '\0') + std::string(300, 'y');
  // Only the source's bytes are read: the others pass nothing.
  auto received = [&](const std::string& bytes, int64_t from) {
    const bool source = g_rank == from;
    acc_string_list* out = nullptr;
    EXPECT_EQ(acc_broadcast_object(g_acc, source ? bytes.data() : nullptr, source ? bytes.size() : 0, from, "object",
                                   &out),
              ACC_OK)
        << acc_last_error_message();
    const void* data = nullptr;
    size_t size = 0, n = 0;
    EXPECT_EQ(acc_string_list_size(out, &n), ACC_OK);
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(acc_string_list_get_bytes(out, 0, &data, &size), ACC_OK);
    std::string got(static_cast<const char*>(data), size);
    acc_string_list_free(out);
    return got;
  };
  EXPECT_EQ(received(sent, src), sent);
  EXPECT_EQ(received("", 0), "");  // nothing to send is sent too
  acc_string_list* out = nullptr;
  ACC_EXPECT_ERROR(acc_broadcast_object(g_acc, "x", 1, g_world, "object", &out), ACC_ERR_INVALID_ARGUMENT,
                   "source process");
  EXPECT_EQ(out, nullptr);
}

TEST(Dist, PadAcrossProcessesEvensRaggedTensors) {
  acc_tensor* t = floats(range_values(g_rank + 1, 1.0f), {g_rank + 1});
  acc_tensor *end = nullptr, *first = nullptr;
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, t, 0, -1.0, 0, "pad", &end));
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, t, 0, 0.0, 1, "pad first", &first));
  auto e = to_floats(end), f = to_floats(first);
  ASSERT_EQ(e.size(), static_cast<size_t>(g_world));
  for (int64_t i = 0; i < g_world; ++i) {
    EXPECT_EQ(e[i], i <= g_rank ? static_cast<float>(i + 1) : -1.0f);
    const int64_t pad = g_world - (g_rank + 1);
    EXPECT_EQ(f[i], i < pad ? 0.0f : static_cast<float>(i - pad + 1));
  }
  for (acc_tensor* x : {t, end, first}) acc_tensor_free(x);
}

// The pad value takes PyTorch's type promotion, as Accelerate's `new_zeros(size) + pad_index`: an
// integral value is Python's int (uint8 wraps -1 to 255 where a checked conversion failed on the
// padding processes alone; bool becomes int64), another a float (int64 becomes float32). The
// longest process's tensor comes back as it was, as in Accelerate.
TEST(Dist, PadValuesPromoteAsInAccelerate) {
  const bool padded = g_rank < g_world - 1;
  auto dtype_of = [](const acc_tensor* t) {
    acc_dtype d = ACC_DTYPE_UNDEFINED;
    EXPECT_EQ(acc_tensor_dtype(t, &d), ACC_OK);
    return d;
  };
  std::vector<uint8_t> ones(static_cast<size_t>(g_rank + 1), 1);
  const int64_t dims[] = {g_rank + 1};
  acc_tensor *bytes = nullptr, *out = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(ones.data(), ones.size(), dims, 1, ACC_DTYPE_UINT8, &bytes));
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, bytes, 0, -1.0, 0, "pad uint8", &out));
  EXPECT_EQ(dtype_of(out), ACC_DTYPE_UINT8);
  const auto wrapped = acc_test::to_host<uint8_t>(out);
  ASSERT_EQ(wrapped.size(), static_cast<size_t>(g_world));
  EXPECT_EQ(wrapped.back(), padded ? 255 : 1);
  acc_tensor_free(out);

  acc_tensor* ids = longs(std::vector<int64_t>(static_cast<size_t>(g_rank + 1), 7), {g_rank + 1});
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, ids, 0, 0.5, 0, "pad int64 by a float", &out));
  EXPECT_EQ(dtype_of(out), padded ? ACC_DTYPE_FLOAT32 : ACC_DTYPE_INT64);
  if (padded) EXPECT_EQ(to_floats(out).back(), 0.5f);
  acc_tensor_free(out);

  acc_tensor* mask = acc_test::bools(ones, {g_rank + 1});
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, mask, 0, 0.0, 0, "pad bool", &out));
  EXPECT_EQ(dtype_of(out), padded ? ACC_DTYPE_INT64 : ACC_DTYPE_BOOL);
  acc_tensor_free(out);
  for (acc_tensor* x : {bytes, ids, mask}) acc_tensor_free(x);
}

TEST(Dist, SplitBetweenProcesses) {
  int64_t total = 0, padded_total = 0;
  for (int64_t n : {9, 2, 1, 0}) {
    int64_t start = -1, end = -1, padding = -1;
    ACC_ASSERT_OK(acc_split_between_processes(g_acc, n, 1, &start, &end, &padding));
    const int64_t per = n / g_world, extra = n % g_world;
    EXPECT_EQ(start, g_rank * per + std::min(g_rank, extra));
    EXPECT_EQ(end - start, per + (g_rank < extra ? 1 : 0));
    // Accelerate pads every share to per + 1 items when n does not divide, an empty one too.
    EXPECT_EQ(end - start + padding, per + (extra > 0 ? 1 : 0)) << n;
    if (n == 9) total = end - start, padded_total = end - start + padding;
  }
  // Every process's padded share has the same length.
  acc_tensor* mine = floats({static_cast<float>(padded_total)}, {1});
  acc_tensor* all = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, mine, "split lengths", &all));
  for (float v : to_floats(all)) EXPECT_EQ(v, static_cast<float>(padded_total));
  EXPECT_GE(padded_total, total);
  acc_tensor_free(mine);
  acc_tensor_free(all);
}

TEST(Dist, TriggerRaisedByOneIsSeenByAll) {
  if (g_rank == g_world - 1) ACC_ASSERT_OK(acc_set_trigger(g_acc));
  // A check without a place for its answer is refused before it takes part or lowers the trigger.
  ACC_EXPECT_ERROR(acc_check_trigger(g_acc, nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
  int fired = 0;
  ACC_ASSERT_OK(acc_check_trigger(g_acc, &fired));
  EXPECT_EQ(fired, 1);
  ACC_ASSERT_OK(acc_check_trigger(g_acc, &fired));
  EXPECT_EQ(fired, 0);  // lowered by the check
}

TEST(Dist, MainProcessFirst) {
  const std::string path = std::string("/tmp/acc_dist_first_") + std::getenv("MASTER_PORT");
  ACC_ASSERT_OK(acc_main_process_first_begin(g_acc));
  if (g_rank == 0) std::ofstream(path) << "made by the main process";
  else EXPECT_TRUE(std::ifstream(path).good()) << "rank " << g_rank << " ran before the main process";
  ACC_ASSERT_OK(acc_main_process_first_end(g_acc));
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::remove(path.c_str());
}

TEST(Ddp, HalfBatchesOnEachProcessMatchTheWholeBatchOnOne) {
  // Reference: a local copy of the same initial model, trained on the whole job's batch.
  TwinModels twins(kDistNet, 11, 0.2, 0.2);
  const char* hook = std::getenv("ACC_TEST_COMM_HOOK");
  const acc_status prepared = acc_prepare(g_acc, &twins.model, &twins.opt, nullptr, nullptr);
  if (hook && std::string(hook) == "bf16" && prepared != ACC_OK) {
    // A Gloo built without bf16 (Debian sid's 2.14): refused, not mis-summed (others train below; before
    // PyTorch 2.2, which gave Gloo bf16, the library's group reduces it in float32).
    EXPECT_EQ(prepared, ACC_ERR_UNSUPPORTED) << acc_last_error_message();
    EXPECT_NE(std::string(acc_last_error_message()).find("this libtorch's Gloo does not"), std::string::npos)
        << acc_last_error_message();
    return;
  }
  ACC_ASSERT_OK(prepared);
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = job_batch(step);
    train_step(twins.local, twins.local_opt, x, y, 8 * g_world, false);
    train_step(twins.model, twins.opt, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, true);
  }
  for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    auto a = weights(twins.local, name), b = weights(twins.model, name);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], weight_tolerance()) << name << "[" << i << "]";
  }
}

namespace {

acc_tensor* as_bf16(acc_tensor* t) {
  acc_tensor* out = nullptr;
  EXPECT_EQ(acc_tensor_to(t, nullptr, ACC_DTYPE_BFLOAT16, &out), ACC_OK) << acc_last_error_message();
  acc_tensor_free(t);
  return out;
}

std::vector<float> as_floats(const acc_tensor* t) {
  acc_tensor* wide = nullptr;
  EXPECT_EQ(acc_tensor_to(t, nullptr, ACC_DTYPE_FLOAT32, &wide), ACC_OK) << acc_last_error_message();
  auto values = to_floats(wide);
  acc_tensor_free(wide);
  return values;
}

// A forward (inputs in bf16, the loss in float32: libtorch 1.13's CPU MSE has no bf16) and a backward.
void bf16_backward(acc_model* model, acc_accelerator* acc, const std::vector<float>& x, const std::vector<float>& y,
                   int64_t rows) {
  acc_tensor* xt = as_bf16(floats(x, {rows, 3}));
  acc_tensor* yt = floats(y, {rows, 2});
  acc_tensor *out = nullptr, *wide = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_tensor_to(out, nullptr, ACC_DTYPE_FLOAT32, &wide), ACC_OK);
  yt = acc_test::on_device_of(out, yt);
  EXPECT_EQ(acc_loss_mse(wide, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc ? acc_backward(acc, loss) : acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
  for (acc_tensor* t : {xt, yt, out, wide, loss}) acc_tensor_free(t);
}

// The gradient of `name` after bf16_backward.
std::vector<float> bf16_gradient(acc_model* model, acc_accelerator* acc, const std::vector<float>& x,
                                 const std::vector<float>& y, int64_t rows, const char* name) {
  bf16_backward(model, acc, x, y, rows);
  acc_tensor *w = nullptr, *grad = nullptr;
  EXPECT_EQ(acc_model_parameter(model, name, &w), ACC_OK);
  EXPECT_EQ(acc_tensor_grad(w, &grad), ACC_OK);
  auto values = as_floats(grad);
  for (acc_tensor* t : {w, grad}) acc_tensor_free(t);
  return values;
}

}  // namespace

// A model cast to bf16 trains data-parallel on CPU processes. (Gloo had no bfloat16 before PyTorch 2.2,
// pytorch#113557: the library's process group moves bf16 as its bits and reduces it in float32.)
TEST(Ddp, ABf16ModelIsBroadcastAveragedAndGathered) {
  ACC_ASSERT_OK(acc_set_seed(static_cast<uint64_t>(30 + g_rank)));  // other weights on every process
  acc_model *model = nullptr, *local = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  ACC_ASSERT_OK(acc_model_to(model, nullptr, ACC_DTYPE_BFLOAT16));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));
  // Every process holds the main process's weights, bit for bit.
  acc_tensor *w = nullptr, *all = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(model, "0.weight", &w));
  ACC_ASSERT_OK(acc_gather(g_acc, w, "bf16 weights", &all));
  const auto gathered = as_floats(all);
  const size_t per = gathered.size() / static_cast<size_t>(g_world);
  for (size_t i = per; i < gathered.size(); ++i) EXPECT_EQ(gathered[i], gathered[i % per]) << i;
  for (acc_tensor* t : {w, all}) acc_tensor_free(t);

  // A copy of those weights computes each process's own gradient; DDP's is their mean, rounded once.
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &local));
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_get_state_dict(g_acc, model, 1, &state));
  ACC_ASSERT_OK(acc_model_to(local, nullptr, ACC_DTYPE_BFLOAT16));
  ACC_ASSERT_OK(acc_model_load_state_dict(local, state, 1));
  acc_tensor_list_free(state);
  auto [x, y] = job_batch(0);
  const auto mine =
      bf16_gradient(local, nullptr, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, "0.weight");
  const auto averaged =
      bf16_gradient(model, g_acc, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, "0.weight");
  acc_tensor* mine_t = floats(mine, {static_cast<int64_t>(mine.size())});
  acc_tensor* every = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, mine_t, "local bf16 gradients", &every));
  const auto locals = to_floats(every);
  for (size_t i = 0; i < mine.size(); ++i) {
    // Each process's gradient divided by the process count in bf16 (exact for 2 and 4: a bf16 ulp of
    // each term otherwise), summed in float32, rounded to bf16 once (an ulp of the sum).
    float sum = 0, magnitude = 0;
    for (int64_t r = 0; r < g_world; ++r) {
      const float term = locals[static_cast<size_t>(r) * mine.size() + i] / static_cast<float>(g_world);
      sum += term;
      magnitude += std::abs(term);
    }
    EXPECT_NEAR(averaged[i], sum, (magnitude + std::abs(sum)) / 128 + 1e-6) << "gradient " << i;
  }
  acc_tensor* all_grads = nullptr;
  acc_tensor* averaged_t = floats(averaged, {static_cast<int64_t>(averaged.size())});
  ACC_ASSERT_OK(acc_gather(g_acc, averaged_t, "averaged bf16 gradients", &all_grads));
  const auto grads = to_floats(all_grads);
  for (size_t i = averaged.size(); i < grads.size(); ++i) EXPECT_EQ(grads[i], grads[i % averaged.size()]) << i;
  // A bf16 sum over processes.
  acc_tensor* one = as_bf16(floats({1.5f + static_cast<float>(g_rank)}, {1}));
  acc_tensor* summed = nullptr;
  ACC_ASSERT_OK(acc_reduce(g_acc, one, ACC_REDUCTION_SUM, "bf16 sum", &summed));
  EXPECT_EQ(as_floats(summed)[0], 1.5f * static_cast<float>(g_world) + static_cast<float>(g_world * (g_world - 1) / 2));
  for (acc_tensor* t : {mine_t, every, averaged_t, all_grads, one, summed}) acc_tensor_free(t);
  ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_model_free(local);
}

// The same under sharded data parallelism: every stage prepares a bf16 model, steps it, and every
// process ends with the same full weights, which the step changed.
TEST(Ddp, ABf16ModelTrainsShardedAtEveryStage) {
  for (const char* stage : {"1", "2", "3"}) {
    acc_accelerator* acc = acc_test::make_accelerator({{"zero_stage", stage}});
    ASSERT_NE(acc, nullptr);
    ACC_ASSERT_OK(acc_set_seed(static_cast<uint64_t>(40 + g_rank)));
    acc_model* model = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
    ACC_ASSERT_OK(acc_model_to(model, nullptr, ACC_DTYPE_BFLOAT16));
    acc_optimizer* opt = nullptr;
    ACC_ASSERT_OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    ASSERT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK)
        << "zero_stage " << stage << ": " << acc_last_error_message();
    auto full_weight = [&] {
      acc_tensor_list* state = nullptr;
      acc_tensor *w = nullptr, *all = nullptr;
      EXPECT_EQ(acc_get_state_dict(acc, model, 1, &state), ACC_OK) << acc_last_error_message();
      EXPECT_EQ(acc_tensor_list_find(state, "0.weight", &w), ACC_OK);
      EXPECT_EQ(acc_gather(acc, w, "bf16 weight", &all), ACC_OK) << acc_last_error_message();
      const auto values = as_floats(all);
      for (acc_tensor* t : {w, all}) acc_tensor_free(t);
      acc_tensor_list_free(state);
      return values;
    };
    const auto before = full_weight();
    auto [x, y] = job_batch(1);
    bf16_backward(model, acc, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8);
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    const auto after = full_weight();
    const size_t per = after.size() / static_cast<size_t>(g_world);
    for (size_t i = per; i < after.size(); ++i) EXPECT_EQ(after[i], after[i % per]) << "zero_stage " << stage;
    EXPECT_NE(after, before) << "zero_stage " << stage;
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
}

TEST(Ddp, TorchScriptModelsTrainDataParallelToo) {
  // Rank 0 saves a TorchScript model; every process loads it, then trains it data-parallel.
  const std::string path = std::string("/tmp/acc_dist_model_") + std::getenv("MASTER_PORT") + ".pt";
  ACC_ASSERT_OK(acc_main_process_first_begin(g_acc));
  if (g_rank == 0) {
    acc_model* spec = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &spec));
    ACC_ASSERT_OK(acc_model_save_torchscript(spec, path.c_str()));
    acc_model_free(spec);
  }
  ACC_ASSERT_OK(acc_main_process_first_end(g_acc));
  acc_model *local = nullptr, *model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &local));
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &model));
  acc_optimizer *local_opt = nullptr, *opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(local, "adam", nullptr, &local_opt));
  ACC_ASSERT_OK(acc_optimizer_create(model, "adam", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = job_batch(step + 10);
    train_step(local, local_opt, x, y, 8 * g_world, false);
    train_step(model, opt, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, true);
  }
  auto a = weights(local, "0.weight"), b = weights(model, "0.weight");
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], std::max(1e-5, weight_tolerance())) << i;
  acc_optimizer_free(local_opt);
  acc_optimizer_free(opt);
  acc_model_free(local);
  acc_model_free(model);
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::remove(path.c_str());
}

TEST(Ddp, NoSyncAccumulatesLocallyAndSyncsOnce) {
  // Two micro-batches, the first under no_sync: the synced step equals one step over both.
  ACC_ASSERT_OK(acc_set_seed(5));
  acc_model* reference = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &reference));
  ACC_ASSERT_OK(acc_set_seed(5));
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  acc_optimizer *ref_opt = nullptr, *opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(reference, "sgd", nullptr, &ref_opt));
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));
  auto [x, y] = job_batch(1);
  // Reference: the gradient of (mean loss of micro 1 + mean loss of micro 2), averaged over ranks,
  // equals the sum of the two halves' mean-loss gradients of the whole job's data / P.
  for (int micro = 0; micro < 2; ++micro) {
    const int64_t rows = 4 * g_world;
    std::vector<float> xs, ys;
    for (int64_t r = 0; r < g_world; ++r) {
      auto xr = rows_of(x, 3, r * 8 + micro * 4, 4), yr = rows_of(y, 2, r * 8 + micro * 4, 4);
      xs.insert(xs.end(), xr.begin(), xr.end());
      ys.insert(ys.end(), yr.begin(), yr.end());
    }
    train_step(reference, nullptr, xs, ys, rows, false);
  }
  ACC_ASSERT_OK(acc_optimizer_step(ref_opt));
  ACC_ASSERT_OK(acc_no_sync_begin(g_acc, model));
  if (std::getenv("ACC_TEST_STATIC_GRAPH") && acc_test::static_graph_needs_an_averaging_first_step()) {
    // libtorch 2.x: a static graph's first step cannot follow a no_sync micro-step (refused alike everywhere).
    acc_tensor* xt = floats(rows_of(x, 3, g_rank * 8, 4), {4, 3});
    acc_tensor* out = nullptr;
    ACC_EXPECT_ERROR(acc_model_forward1(model, xt, 0, &out), ACC_ERR_UNSUPPORTED, "ddp_static_graph");
    acc_tensor_free(xt);
    ACC_ASSERT_OK(acc_no_sync_end(g_acc, model));
    for (acc_optimizer* o : {ref_opt, opt}) acc_optimizer_free(o);
    for (acc_model* m : {reference, model}) acc_model_free(m);
    return;
  }
  train_step(model, nullptr, rows_of(x, 3, g_rank * 8, 4), rows_of(y, 2, g_rank * 8, 4), 4, true);
  ACC_ASSERT_OK(acc_no_sync_end(g_acc, model));
  train_step(model, nullptr, rows_of(x, 3, g_rank * 8 + 4, 4), rows_of(y, 2, g_rank * 8 + 4, 4), 4, true);
  ACC_ASSERT_OK(acc_optimizer_step(opt));
  for (const char* name : {"0.weight", "2.bias"}) {
    auto a = weights(reference, name), b = weights(model, name);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], weight_tolerance()) << name << "[" << i << "]";
  }
  acc_optimizer_free(ref_opt);
  acc_optimizer_free(opt);
  acc_model_free(reference);
  acc_model_free(model);
}

TEST(Ddp, TriggerSyncInBackwardSyncsInsideNoSync) {
  ACC_ASSERT_OK(acc_set_seed(9));
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));
  auto [x, y] = job_batch(2);
  acc_tensor* xt = floats(rows_of(x, 3, g_rank * 8, 8), {8, 3});
  acc_tensor* yt = floats(rows_of(y, 2, g_rank * 8, 8), {8, 2});
  if (std::getenv("ACC_TEST_STATIC_GRAPH")) {
    // The static graph's first averaging step cannot begin inside no_sync; once it is done it can.
    acc_tensor* first = nullptr;
    ACC_ASSERT_OK(acc_no_sync_begin(g_acc, model));
    if (acc_test::static_graph_needs_an_averaging_first_step()) {  // libtorch 2.x: the forward already
      ACC_EXPECT_ERROR(acc_model_forward1(model, xt, 0, &first), ACC_ERR_UNSUPPORTED, "ddp_static_graph");
    } else {
      ACC_ASSERT_OK(acc_model_forward1(model, xt, 0, &first));
      ACC_EXPECT_ERROR(acc_trigger_sync_in_backward(g_acc, model), ACC_ERR_UNSUPPORTED, "ddp_static_graph");
    }
    ACC_ASSERT_OK(acc_no_sync_end(g_acc, model));
    acc_tensor_free(first);
    train_step(model, opt, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, true);
  }
  acc_tensor *out = nullptr, *loss = nullptr, *w = nullptr, *grad = nullptr, *all = nullptr;
  ACC_ASSERT_OK(acc_no_sync_begin(g_acc, model));
  ACC_ASSERT_OK(acc_model_forward1(model, xt, 0, &out));
  yt = acc_test::on_device_of(out, yt);
  ACC_ASSERT_OK(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss));
  ACC_ASSERT_OK(acc_trigger_sync_in_backward(g_acc, model));
  ACC_ASSERT_OK(acc_backward(g_acc, loss));
  ACC_ASSERT_OK(acc_no_sync_end(g_acc, model));
  // Every process holds the same (averaged) gradient.
  ACC_ASSERT_OK(acc_model_parameter(model, "2.bias", &w));
  ACC_ASSERT_OK(acc_tensor_grad(w, &grad));
  ACC_ASSERT_OK(acc_gather(g_acc, grad, "grads", &all));
  auto g = to_floats(all);
  for (int64_t r = 1; r < g_world; ++r)
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(g[r * 2 + i], g[i], 1e-6);
  for (acc_tensor* t : {xt, yt, out, loss, w, grad, all}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

TEST(Data, GatherForMetricsCountsEachSampleOnce) {
  // Accelerate's example: 9 samples, batch 5; the last round repeats samples to even out.
  acc_dataset* ds = id_dataset(9);
  acc_dataloader* dl = prepared_loader(ds, 5);
  const std::vector<int64_t> gathered = gather_epoch(dl, "metrics");
  EXPECT_EQ(gathered, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(Data, GatherForMetricsWithoutEvenBatchesDropsThePaddingOfTheLastRound) {
  // 8P - 2 samples in batches of 4 without even_batches: the last process's last batch holds 2. As
  // in Accelerate, it is padded to gather, and gather_for_metrics keeps the epoch's remainder
  // (len % total batch size) of the last round: the padding goes, each sample counts once.
  const int64_t n = 8 * g_world - 2;
  acc_dataset* ds = id_dataset(n);
  acc_accelerator* acc = acc_test::make_accelerator({{"even_batches", "0"}});
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 4));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
  std::vector<int64_t> gathered;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
    if (!batch) break;
    acc_tensor *b = nullptr, *padded = nullptr, *all = nullptr;
    ASSERT_EQ(acc_tensor_list_get(batch, 0, &b), ACC_OK);
    ASSERT_EQ(acc_pad_across_processes(acc, b, 0, -1, 0, "pad", &padded), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_gather_for_metrics(acc, padded, "metrics", &all), ACC_OK) << acc_last_error_message();
    const auto v = acc_test::to_longs(all);
    gathered.insert(gathered.end(), v.begin(), v.end());
    for (acc_tensor* t : {b, padded, all}) acc_tensor_free(t);
    acc_tensor_list_free(batch);
  }
  std::vector<int64_t> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(gathered, want);
  acc_dataloader_free(dl);
  acc_options_free(o);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
}

TEST(Data, StreamsAreShardedAndGatheredOnce) {
  // A stream of 9 samples, batch 2: every process reads it all and keeps its slice of each round;
  // gather_for_metrics drops the padding of the last round.
  struct Counter {
    int64_t cursor = 0;
  } counter;
  auto next = [](void* ud, acc_tensor_list** out) -> int {
    auto* c = static_cast<Counter*>(ud);
    if (c->cursor >= 9) {
      *out = nullptr;
      return 0;
    }
    const int64_t i = c->cursor++;
    acc_tensor* t = nullptr;
    if (acc_tensor_from_host(&i, sizeof i, nullptr, 0, ACC_DTYPE_INT64, &t) != ACC_OK) return 1;
    const bool ok = acc_tensor_list_create(out) == ACC_OK && acc_tensor_list_append(*out, nullptr, t) == ACC_OK;
    acc_tensor_free(t);
    return ok ? 0 : 1;
  };
  auto start = [](void* ud, int64_t) -> int {
    static_cast<Counter*>(ud)->cursor = 0;
    return 0;
  };
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_iterator(next, start, &counter, nullptr, 9, &ds));
  acc_dataloader* dl = prepared_loader(ds, 2);
  const std::vector<int64_t> gathered = gather_epoch(dl, "stream metrics");
  EXPECT_EQ(gathered, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

// With dispatch_batches process 0 alone reads the data: when its read fails (a stream's next, a
// sample's callback), every process fails at the same batch at once, naming process 0's error (the
// others would otherwise wait for that batch until the timeout), and the processes stay in step.
TEST(Data, AFailedReadOfTheDispatchingProcessFailsEveryProcessAtOnce) {
  // Sample `failing` fails (on process 0: the only one that reads); samples are their ids.
  struct Source {
    int64_t cursor = 0, failing = 0;
    static int sample(void* ud, int64_t index, acc_tensor_list** out) {
      *out = nullptr;
      if (index == static_cast<Source*>(ud)->failing) {
        acc_callback_set_error("the shard file is unreadable");
        return 1;
      }
      acc_tensor* t = nullptr;
      if (acc_tensor_from_host(&index, sizeof index, nullptr, 0, ACC_DTYPE_INT64, &t) != ACC_OK) return 1;
      const bool ok = acc_tensor_list_create(out) == ACC_OK && acc_tensor_list_append(*out, nullptr, t) == ACC_OK;
      acc_tensor_free(t);
      return ok ? 0 : 1;
    }
    static int next(void* ud, acc_tensor_list** out) {
      auto* s = static_cast<Source*>(ud);
      *out = nullptr;
      return s->cursor < 40 ? sample(ud, s->cursor++, out) : 0;
    }
    static int start(void* ud, int64_t) {
      static_cast<Source*>(ud)->cursor = 0;
      return 0;
    }
  };
  acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  for (const bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "stream" : "map-style");
    // Batch 2 on each process: a global batch holds 2 * P samples, and process 0 reads one ahead, so
    // the sample of the 4th global batch fails the 3rd call.
    Source source;
    source.failing = 3 * 2 * g_world + 1;
    acc_dataset* ds = nullptr;
    ACC_ASSERT_OK(stream ? acc_dataset_from_iterator(Source::next, Source::start, &source, nullptr, -1, &ds)
                         : acc_dataset_from_callback(40, Source::sample, &source, nullptr, &ds));
    acc_options* o = nullptr;
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
    ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
    acc_dataloader* dl = nullptr;
    ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
    acc_options_free(o);
    ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    acc_status status = ACC_OK;
    int calls = 0;
    while (status == ACC_OK && calls < 20) {
      acc_tensor_list* batch = nullptr;
      status = acc_dataloader_next(dl, &batch);
      ++calls;
      acc_tensor_list_free(batch);
    }
    EXPECT_EQ(calls, 3);
    const std::string message = acc_last_error_message();
    EXPECT_EQ(status, ACC_ERR_IO) << message;
    EXPECT_NE(message.find("the shard file is unreadable"), std::string::npos) << message;
    if (g_rank != 0)
      EXPECT_NE(message.find("process 0, which reads the batches of every process (dispatch_batches), could not read"),
                std::string::npos)
          << message;
    // In step: the next collective meets the others' (a wait for the timeout would fail it).
    EXPECT_EQ(acc_wait_for_everyone(acc), ACC_OK) << acc_last_error_message();
    // The epoch given up, the next one reads whole on every process.
    EXPECT_EQ(acc_dataloader_end_epoch(dl), ACC_OK) << acc_last_error_message();
    source.failing = -1;
    int batches = 0;
    for (acc_tensor_list* batch = nullptr;; ++batches) {
      ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
      if (!batch) break;
      acc_tensor_list_free(batch);
    }
    EXPECT_EQ(batches, (40 + 2 * g_world - 1) / (2 * g_world));
    acc_dataloader_free(dl);
    acc_dataset_free(ds);
  }
  acc_accelerator_free(acc);
}

// A batch the dispatch cannot send (more fields than its header describes) fails every process alike.
TEST(Data, ABatchTheDispatchCannotSendFailsEveryProcess) {
  acc_tensor* t = floats(std::vector<float>(8, 1.0f), {8});
  const std::vector<const acc_tensor*> fields(9, t);
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields.data(), fields.size(), &ds));
  acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  acc_dataloader* dl = prepared_loader(ds, 2, acc, true);
  acc_tensor_list* batch = nullptr;
  ACC_EXPECT_ERROR(acc_dataloader_next(dl, &batch), ACC_ERR_INVALID_ARGUMENT,
                   "dispatch_batches supports up to 8 fields");
  EXPECT_EQ(acc_wait_for_everyone(acc), ACC_OK) << acc_last_error_message();
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
  acc_tensor_free(t);
}

TEST(Data, PreparedLoadersShardBatchesAcrossProcesses) {
  // 10 samples, batch 2: batch k goes to process k mod P; the last round is completed from the start.
  acc_dataset* ds = id_dataset(10);
  acc_dataloader* dl = prepared_loader(ds, 2);
  int64_t length = 0, total_batch = 0, total_length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, (5 + g_world - 1) / g_world);
  ACC_ASSERT_OK(acc_dataloader_total_batch_size(dl, &total_batch));
  ACC_ASSERT_OK(acc_dataloader_total_dataset_length(dl, &total_length));
  EXPECT_EQ(total_batch, 2 * g_world);
  EXPECT_EQ(total_length, 10);
  const std::vector<int64_t> seen = acc_test::epoch_ids(dl);
  ASSERT_EQ(static_cast<int64_t>(seen.size()), 2 * length);
  EXPECT_EQ(seen[0], 2 * g_rank);
  EXPECT_EQ(seen[1], 2 * g_rank + 1);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

namespace {
// Prepares a shuffling loader (batches of 2, with `generator_seed` if >= 0) on `acc` and expects
// each epoch's global order, gathered in rank order, to be `orders`.
void expect_prepared_orders(acc_accelerator* acc, int64_t samples, int64_t generator_seed,
                            const nlohmann::json& orders) {
  acc_dataset* ds = id_dataset(samples);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
  ACC_ASSERT_OK(acc_options_set_bool(o, "shuffle", 1));
  if (generator_seed >= 0) ACC_ASSERT_OK(acc_options_set_int(o, "generator_seed", generator_seed));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
  // 24 samples in batches of 2 fill every round on 2, 3 and 4 processes: gathering each step's
  // batches in rank order gives the epoch's global order.
  for (const auto& expected : orders) {
    std::vector<int64_t> order;
    for (;;) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
      if (!batch) break;
      acc_tensor *b = nullptr, *all = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_get(batch, 0, &b));
      ACC_ASSERT_OK(acc_gather(acc, b, "shuffle order", &all));
      const auto v = acc_test::to_longs(all);
      order.insert(order.end(), v.begin(), v.end());
      acc_tensor_free(b);
      acc_tensor_free(all);
      acc_tensor_list_free(batch);
    }
    EXPECT_EQ(order, expected.get<std::vector<int64_t>>());
  }
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}
}  // namespace

TEST(Data, UnseededShuffleFollowsProcessZerosGeneratorEveryEpoch) {
  // Every process seeds torch differently, yet all shuffle alike: each epoch's order is PyTorch's own
  // RandomSampler over process 0's generator, as Accelerate synchronizes it (export_shuffles.py).
  const auto ref = nlohmann::json::parse(acc_test::read_file(acc_test::data_dir() + "/synchronized_shuffle.json"));
  ACC_ASSERT_OK(acc_set_seed(ref.at("seed").get<uint64_t>() + 1000 * static_cast<uint64_t>(g_rank)));
  expect_prepared_orders(g_acc, ref.at("samples").get<int64_t>(), -1, ref.at("orders"));
}

TEST(Data, ALoadersOwnGeneratorShufflesAsPyTorchsOnEveryProcessSharedOrDispatched) {
  // DataLoader(generator=g) prepared: Accelerate keeps g (no draw from torch's generator) and
  // synchronizes it; each epoch's base seed is drawn from g before the order (export_shuffles.py).
  // Dispatched, Accelerate drops g from the loader process 0 reads through (its sampler keeps it):
  // the base seed comes from torch's generator, the order from g alone.
  const auto ref = nlohmann::json::parse(acc_test::read_file(acc_test::data_dir() + "/synchronized_shuffle.json"));
  for (const char* dispatch : {"0", "1"}) {
    SCOPED_TRACE(std::string("dispatch_batches ") + dispatch);
    ACC_ASSERT_OK(acc_set_seed(ref.at("seed").get<uint64_t>() + 1000 * static_cast<uint64_t>(g_rank)));
    acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", dispatch}});
    expect_prepared_orders(acc, ref.at("samples").get<int64_t>(), ref.at("generator_seed").get<int64_t>(),
                           ref.at(std::string(dispatch) == "1" ? "dispatched_generator_orders" : "generator_orders"));
    acc_accelerator_free(acc);
  }
}

// With use_seedable_sampler, process 0 reading for everyone (dispatch_batches) shuffles as the
// sharded loader does (Accelerate installs its SeedableRandomSampler in the dispatcher too): epoch e
// permutes with data_seed + e.
TEST(Data, DispatchedBatchesShuffleWithTheSeedableSampler) {
  acc_dataset* ds = id_dataset(24);
  auto orders = [&](const char* dispatch) {
    EXPECT_EQ(acc_set_seed(100 + static_cast<uint64_t>(g_rank)), ACC_OK);  // processes seeded apart
    acc_accelerator* acc =
        acc_test::make_accelerator({{"use_seedable_sampler", "1"}, {"data_seed", "5"}, {"dispatch_batches", dispatch}});
    acc_dataloader* dl = prepared_loader(ds, 2, acc, true);
    // 24 samples fill every round: nothing is padded, so the gathered epoch is the global order.
    std::vector<std::vector<int64_t>> epochs;
    for (int e = 0; e < 2; ++e) epochs.push_back(gather_epoch(dl, "seedable order", acc));
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
    return epochs;
  };
  const auto sharded = orders("0"), dispatched = orders("1");
  EXPECT_EQ(dispatched, sharded);
  EXPECT_NE(sharded[0], sharded[1]);
  acc_dataset_free(ds);
}

// Accelerate's skip_first_batches over a dispatched map-style loader skips through its batch
// sampler: the skipped batches are never read, and the epoch's first batch read, whose first samples
// pad the last batch, is the first after the skip.
TEST(Data, ADispatchedSkipLeavesItsBatchesUnreadAndPadsWithTheFirstBatchRead) {
  const int64_t p = g_world;
  // 2P + 1 samples, one per process a step: global batches [0, P), [P, 2P) and [2P], the last padded.
  acc_dataset* ds = id_dataset(2 * p + 1);
  acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  acc_dataloader* dl = prepared_loader(ds, 1, acc);
  ACC_ASSERT_OK(acc_dataloader_skip_first_batches(dl, 1));
  // The last global batch [2P, P, P + 1, ...]: one sample each.
  EXPECT_EQ(acc_test::epoch_ids(dl), (std::vector<int64_t>{p + g_rank, g_rank == 0 ? 2 * p : p + g_rank - 1}));
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
}

namespace {
// An epoch of `dl` after acc_set_seed(seed), then what torch.rand(3) draws next.
std::vector<float> draws_after_an_epoch(acc_dataloader* dl, uint64_t seed) {
  EXPECT_EQ(acc_set_seed(seed), ACC_OK);
  for (;;) {
    acc_tensor_list* batch = nullptr;
    EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
    if (!batch) break;
    acc_tensor_list_free(batch);
  }
  return acc_test::next_global_draws();
}
}  // namespace

// Every process makes the dispatched base loader's iterator (Accelerate, torch >= 2.0.1); with
// workers that iterator asks its sampler for the first batches at once, and an unseeded shuffle then
// draws its seed from torch's generator: on the processes that never read it too, as a plain loader
// with workers draws (a base seed, then the order's seed) in its epoch.
TEST(Data, ADispatchedLoaderWithWorkersDrawsOnEveryProcessAsAPlainOneDoes) {
  acc_dataset* ds = id_dataset(4 * g_world);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
  ACC_ASSERT_OK(acc_options_set_bool(o, "shuffle", 1));
  ACC_ASSERT_OK(acc_options_set_int(o, "num_workers", 2));
  acc_dataloader *plain = nullptr, *dispatched = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &plain));
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dispatched));
  acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dispatched, nullptr));
  const uint64_t seed = 77 + static_cast<uint64_t>(g_rank);
  EXPECT_EQ(draws_after_an_epoch(dispatched, seed), draws_after_an_epoch(plain, seed));
  acc_dataloader_free(plain);
  acc_dataloader_free(dispatched);
  acc_accelerator_free(acc);
  acc_options_free(o);
  acc_dataset_free(ds);
}

// A dispatched loader whose batches the processes cannot split evenly is refused at prepare, as
// Accelerate's prepare_data_loader refuses it (the slices dropped each batch's last rows); so is a
// stream that is not dispatched.
TEST(Data, SplitBatchesNeedABatchSizeTheProcessesDivide) {
  acc_dataset* ds = id_dataset(10);
  acc_accelerator* acc = acc_test::make_accelerator({{"split_batches", "1"}, {"dispatch_batches", "1"}});
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  // A batch of 1 too: Accelerate lets it through, and its dispatcher sends every process 0 samples
  // of every batch but the last (here too, before: the epoch's data was lost without a word).
  for (const int64_t batch_size : {g_world + 1, int64_t{1}}) {
    ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", batch_size));
    acc_dataloader* dl = nullptr;
    ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
    ACC_EXPECT_ERROR(acc_prepare(acc, nullptr, nullptr, &dl, nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "split_batches needs a batch size (" + std::to_string(batch_size) +
                         ") that is a round multiple of the number of processes");
    acc_dataloader_free(dl);
  }
  // A stream every process reads itself (not dispatched) too, as Accelerate's prepare refuses it
  // (found by a hunt: refused at the first batch, after prepare had said yes).
  acc_accelerator* reading = acc_test::make_accelerator({{"split_batches", "1"}, {"dispatch_batches", "0"}});
  acc_dataset* stream = nullptr;
  const auto never_read = [](void*, acc_tensor_list**) -> int { return 1; };
  ACC_ASSERT_OK(acc_dataset_from_iterator(never_read, nullptr, nullptr, nullptr, 10, &stream));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", g_world + 1));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(stream, o, &dl));
  ACC_EXPECT_ERROR(acc_prepare(reading, nullptr, nullptr, &dl, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "split_batches needs a batch size (" + std::to_string(g_world + 1) + ")");
  acc_dataloader_free(dl);
  acc_dataset_free(stream);
  acc_accelerator_free(reading);
  acc_options_free(o);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
}

// Bool tensors (a metric's `predictions == labels`) go through every collective, as torch 2.x's
// Gloo takes them; libtorch 1.13's Gloo refused them ("Invalid scalar type"). A sum is a logical or.
TEST(Dist, BoolTensorsGoThroughEveryCollective) {
  // Process r: [r is even, true, r == 0].
  acc_tensor* t = acc_test::bools({static_cast<uint8_t>(g_rank % 2 == 0), 1, static_cast<uint8_t>(g_rank == 0)}, {3});
  auto bytes = [](const acc_tensor* out) {
    acc_dtype dtype = ACC_DTYPE_FLOAT32;
    EXPECT_EQ(acc_tensor_dtype(out, &dtype), ACC_OK);
    EXPECT_EQ(dtype, ACC_DTYPE_BOOL);
    return acc_test::to_host<uint8_t>(out);
  };
  std::vector<uint8_t> gathered;
  for (int64_t r = 0; r < g_world; ++r)
    gathered.insert(gathered.end(), {static_cast<uint8_t>(r % 2 == 0), 1, static_cast<uint8_t>(r == 0)});
  acc_tensor* out = nullptr;
  ACC_ASSERT_OK(acc_gather(g_acc, t, "bool gather", &out));
  EXPECT_EQ(bytes(out), gathered);
  acc_tensor_free(out);
  ACC_ASSERT_OK(acc_gather_for_metrics(g_acc, t, "bool gather_for_metrics", &out));
  EXPECT_EQ(bytes(out), gathered);
  acc_tensor_free(out);
  ACC_ASSERT_OK(acc_reduce(g_acc, t, ACC_REDUCTION_SUM, "bool reduce", &out));
  EXPECT_EQ(bytes(out), (std::vector<uint8_t>{1, 1, 1}));
  acc_tensor_free(out);
  ACC_ASSERT_OK(acc_broadcast(g_acc, t, g_world - 1, "bool broadcast", &out));
  EXPECT_EQ(bytes(out), (std::vector<uint8_t>{static_cast<uint8_t>((g_world - 1) % 2 == 0), 1, 0}));
  acc_tensor_free(out);
  ACC_EXPECT_ERROR(acc_reduce(g_acc, t, ACC_REDUCTION_MEAN, "bool mean", &out), ACC_ERR_INVALID_ARGUMENT,
                   "a mean needs a floating tensor");
  acc_tensor_free(t);
}

// Processes padding different dimensions fail at that call, every one of them, naming the
// dimensions; a process whose dim is no dimension took part in no announcement, so the others' call
// was paired with its next collective and every later call failed one off.
TEST(Dist, PaddingDifferentDimensionsFailsAtThatCallOnEveryProcess) {
  // The last process holds [2], the others [2, 1].
  const bool flat = g_rank == g_world - 1;
  acc_tensor* t = flat ? floats({1, 2}, {2}) : floats({1, 2}, {2, 1});
  acc_tensor* out = nullptr;
  ACC_EXPECT_ERROR(acc_pad_across_processes(g_acc, t, -1, 0, 0, "pad last", &out), ACC_ERR_INVALID_ARGUMENT,
                   flat ? "pads dimension 1, this one dimension 0" : "this one dimension 1");
  ACC_EXPECT_ERROR(acc_pad_across_processes(g_acc, t, 1, 0, 0, "pad one", &out), ACC_ERR_INVALID_ARGUMENT,
                   flat ? "pads dimension 1, this one no dimension" : "pads no dimension, this one dimension 1");
  EXPECT_EQ(out, nullptr);
  acc_tensor_free(t);
  expect_still_in_step("after the pads");
}

// A dimension no process's tensor has pads nothing on any of them, as Accelerate's returns each
// tensor as it is; the processes stay in step.
TEST(Dist, PaddingADimensionNoTensorHasLeavesEveryTensorAsItIs) {
  acc_tensor* t = floats(range_values(g_rank + 1, 0.0f), {g_rank + 1});
  acc_tensor* out = nullptr;
  ACC_ASSERT_OK(acc_pad_across_processes(g_acc, t, 3, 0, 0, "pad none", &out));
  EXPECT_EQ(to_floats(out), range_values(g_rank + 1, 0.0f));
  acc_tensor_free(out);
  acc_tensor_free(t);
  expect_still_in_step("after the pad");
}

TEST(Dist, MismatchedShapesOrDtypesAreNamedOnEveryProcessNotACrash) {
  // Gloo aborts a process, or hands bytes of the wrong size on, when the tensors differ.
  acc_tensor* t = floats(range_values(g_rank + 1, 0.0f), {g_rank + 1});
  acc_tensor* out = nullptr;
  ACC_EXPECT_ERROR(acc_gather(g_acc, t, "ragged gather", &out), ACC_ERR_INVALID_ARGUMENT,
                   "collective 'ragged gather' needs the same shape and dtype on every process, got rank 0 [1] Float, "
                   "rank 1 [2] Float");
  ACC_EXPECT_ERROR(acc_reduce(g_acc, t, ACC_REDUCTION_SUM, "ragged reduce", &out), ACC_ERR_INVALID_ARGUMENT,
                   "ragged reduce");
  ACC_EXPECT_ERROR(acc_broadcast(g_acc, t, 0, "ragged broadcast", &out), ACC_ERR_INVALID_ARGUMENT, "ragged broadcast");
  EXPECT_EQ(out, nullptr);
  acc_tensor_free(t);
  // The same shape in another dtype on the last process.
  acc_tensor* mixed = g_rank == g_world - 1 ? longs({1, 2}, {2}) : floats({1.0f, 2.0f}, {2});
  ACC_EXPECT_ERROR(acc_gather(g_acc, mixed, "mixed gather", &out), ACC_ERR_INVALID_ARGUMENT, "Long");
  ACC_EXPECT_ERROR(acc_broadcast(g_acc, mixed, 0, "mixed broadcast", &out), ACC_ERR_INVALID_ARGUMENT, "Long");
  acc_tensor_free(mixed);
  // Shapes of 18 dimensions that differ only in the last two (past the sizes an announcement lists).
  std::vector<int64_t> dims(16, 1);
  dims.push_back(g_rank == g_world - 1 ? 3 : 2);
  dims.push_back(g_rank == g_world - 1 ? 2 : 3);
  acc_tensor* deep = floats(range_values(6, 0.0f), dims);
  ACC_EXPECT_ERROR(acc_gather(g_acc, deep, "deep gather", &out), ACC_ERR_INVALID_ARGUMENT, "18 dims");
  ACC_EXPECT_ERROR(acc_reduce(g_acc, deep, ACC_REDUCTION_SUM, "deep reduce", &out), ACC_ERR_INVALID_ARGUMENT,
                   "deep reduce");
  EXPECT_EQ(out, nullptr);
  acc_tensor_free(deep);
  expect_still_in_step("after the mismatches");
}

// One process's bad argument (a NULL tensor or output, an unknown reduction, a source outside the
// job, None where the others sum, NULL object data) is an error at that call on every process, and
// the next collective pairs as it should (the bad process used to skip the call's announcement, so
// the others paired it with their next call and the job stayed out of step).
TEST(Dist, OneProcesssBadArgumentFailsThatCallEverywhereAndTheJobStaysInStep) {
  const bool bad = g_rank == g_world - 1;
  acc_tensor* t = floats({1.0f, 2.0f}, {2});
  acc_tensor* out = nullptr;
  acc_string_list* list = nullptr;
  auto expect_failed_everywhere = [&](acc_status status, const char* what) {
    EXPECT_NE(status, ACC_OK) << what << " on process " << g_rank;
    if (!bad)
      EXPECT_NE(std::string(acc_last_error_message()).find(what), std::string::npos) << acc_last_error_message();
    EXPECT_EQ(out, nullptr) << what;
    expect_still_in_step(what);
  };
  expect_failed_everywhere(acc_gather(g_acc, bad ? nullptr : t, "null gather", &out), "null gather");
  expect_failed_everywhere(acc_gather(g_acc, t, "null out", bad ? nullptr : &out), "null out");
  expect_failed_everywhere(
      acc_reduce(g_acc, t, bad ? static_cast<acc_reduction>(77) : ACC_REDUCTION_SUM, "odd reduction", &out),
      "odd reduction");
  expect_failed_everywhere(acc_reduce(g_acc, t, bad ? ACC_REDUCTION_NONE : ACC_REDUCTION_SUM, "none", &out), "none");
  expect_failed_everywhere(acc_broadcast(g_acc, t, bad ? g_world : 0, "far source", &out), "far source");
  expect_failed_everywhere(acc_pad_across_processes(g_acc, bad ? nullptr : t, 0, 0, 0, "null pad", &out), "null pad");
  expect_failed_everywhere(acc_gather_for_metrics(g_acc, bad ? nullptr : t, "null metrics", &out), "null metrics");
  expect_failed_everywhere(acc_gather_object(g_acc, bad ? nullptr : "ab", 2, "null object", &list), "null object");
  EXPECT_EQ(list, nullptr);
  // The source's NULL data (the source is the last process).
  expect_failed_everywhere(acc_broadcast_object(g_acc, bad ? nullptr : "ab", 2, g_world - 1, "null source", &list),
                           "null source");
  EXPECT_EQ(list, nullptr);
  acc_tensor_free(t);
}

// Every process must make the same collective calls, with the same names and parameters, in the
// same order. The last process does otherwise here: each call is an error naming both on every
// process (Gloo, pairing a gather with a gather_object, aborted the process; a skipped call, or
// another dim to pad, gave a wrong result without an error), and the processes stay in step.
TEST(Dist, MismatchedCallsAreErrorsOnEveryProcessNotACrashOrAWrongResult) {
  const bool odd = g_rank == g_world - 1;
  acc_tensor* t = floats({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  acc_tensor* out = nullptr;
  acc_string_list* list = nullptr;
  const acc_status other = odd ? acc_gather_object(g_acc, "a much longer message than eight bytes", 38, "g", &list)
                               : acc_gather(g_acc, t, "g", &out);
  EXPECT_EQ(other, ACC_ERR_INVALID_ARGUMENT) << acc_last_error_message();
  EXPECT_NE(
      std::string(acc_last_error_message()).find(odd ? "calls gather at the same point" : "calls gather_object at"),
      std::string::npos)
      << acc_last_error_message();
  // A reduction skipped by one process: its next one would have summed with the others' first.
  const acc_status skipped = odd ? acc_reduce(g_acc, t, ACC_REDUCTION_SUM, "correct_count", &out)
                                 : acc_reduce(g_acc, t, ACC_REDUCTION_SUM, "loss_sum", &out);
  EXPECT_EQ(skipped, ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("named otherwise"), std::string::npos)
      << acc_last_error_message();
  // A sum against a mean, another source, another dim to pad.
  ACC_EXPECT_ERROR(acc_reduce(g_acc, t, odd ? ACC_REDUCTION_MEAN : ACC_REDUCTION_SUM, "r", &out),
                   ACC_ERR_INVALID_ARGUMENT, "calls reduce (");
  ACC_EXPECT_ERROR(
      acc_broadcast(g_acc, t, odd ? 0 : g_world - 1, "b", &out), ACC_ERR_INVALID_ARGUMENT,
      odd ? std::string("this one from process 0") : "this one from process " + std::to_string(g_world - 1));
  ACC_EXPECT_ERROR(acc_pad_across_processes(g_acc, t, odd ? 1 : 0, 0.0, 0, "p", &out), ACC_ERR_INVALID_ARGUMENT,
                   odd ? "this one dimension 1" : "this one dimension 0");
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(list, nullptr);
  acc_tensor_free(t);
  expect_still_in_step("after the mismatched calls");
}

// The collectives a loader makes by itself are compared like the user's: a process that starts a
// shuffled epoch (its generator taken from process 0) while another gathers failed only at the
// timeout (30 minutes by default), both waiting in different collectives (a hunt's finding).
TEST(Dist, AnEpochStartedWhileAnotherProcessGathersFailsAtOnceOnEveryProcess) {
  acc_dataset* ds = id_dataset(16);
  acc_dataloader* dl = prepared_loader(ds, 2, g_acc, /*shuffle=*/true);
  acc_tensor* t = floats({1.0f, 2.0f}, {2});
  acc_tensor* out = nullptr;
  acc_tensor_list* batch = nullptr;
  const auto started = std::chrono::steady_clock::now();
  if (g_rank == 0) {
    ACC_EXPECT_ERROR(acc_gather(g_acc, t, "user gather", &out), ACC_ERR_INVALID_ARGUMENT, "calls broadcast at the same");
  } else {
    ACC_EXPECT_ERROR(acc_dataloader_next(dl, &batch), ACC_ERR_INVALID_ARGUMENT, "calls gather at the same point");
    EXPECT_NE(std::string(acc_last_error_message()).find("data loader shuffle"), std::string::npos)
        << acc_last_error_message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "it waited for the timeout";
  expect_still_in_step("after the loader's mismatched call");
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(batch, nullptr);
  acc_tensor_free(t);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

// With dispatch_batches, process 0 reads every batch: a process that leaves an epoch early (the others
// going on) got nothing wrong said, and the others took its next epoch's batches as the rest of theirs,
// samples repeated (a hunt's finding). Each batch's header now names its epoch and batch, which the
// others check (process 0 is not told: a round trip per batch would end its reading ahead).
TEST(Dist, DispatchedBatchesAreNeverAnotherEpochs) {
  acc_accelerator* acc = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  acc_dataset* ds = id_dataset(6 * g_world);
  acc_dataloader* dl = prepared_loader(ds, 2, acc, /*shuffle=*/true);
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
  acc_tensor_list_free(batch);
  batch = nullptr;
  if (g_rank == 0) {
    ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));  // process 0 leaves the first epoch alone
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    acc_tensor_list_free(batch);
  } else {
    ACC_EXPECT_ERROR(acc_dataloader_next(dl, &batch), ACC_ERR_INVALID_ARGUMENT,
                     "process 0 sends batch 0 of the loader's epoch 2 while this process reads batch 1 of its epoch 1");
    EXPECT_EQ(batch, nullptr);
  }
  expect_still_in_step("after a process left a dispatched epoch");
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_accelerator_free(acc);
}

// Replicas stepped by other rules drift apart: another learning rate (or algorithm) on one process
// is refused at prepare, on every process, naming the setting.
TEST(Dist, AnotherOptimizerOnOneProcessIsRefusedAtPrepare) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_optimizer_set_lr(opt, 0, g_rank == g_world - 1 ? 0.5 : 0.001));
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_EXPECT_ERROR(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "every process must prepare the same optimizer, and the first setting that differs: process 0 has "
                   "group 0 options");
  acc_accelerator_free(acc);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

namespace {

// On process 1, the fault `mode` asks for: "exit" dies without a word, "stall" outlives the others'
// timeout; either way the process ends here. Other processes go on.
void fail_process_1_by(const std::string& mode) {
  if (g_rank != 1) return;
  if (mode != "exit") std::this_thread::sleep_for(std::chrono::seconds(8));
  acc_test::exit_at_once(0);
}

}  // namespace

TEST(Fault, ADeadOrStalledPeerIsAnErrorNotAHang) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  fail_process_1_by(mode);
  const auto start = std::chrono::steady_clock::now();
  acc_status status = acc_wait_for_everyone(g_acc);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(status == ACC_ERR_TIMEOUT || status == ACC_ERR_ABORTED) << acc_status_name(status);
  EXPECT_NE(std::string(acc_last_error_message()).find("wait_for_everyone"), std::string::npos)
      << acc_last_error_message();
  EXPECT_LT(seconds, 20.0);
  std::fflush(stdout);
  acc_test::exit_at_once(testing::Test::HasFailure() ? 1 : 0);  // the group is broken: no clean teardown to wait for
}

namespace {

// A linear model prepared for DDP and trained `steps` steps by both processes; then process 1 exits
// or stalls (`mode`) and only process 0 returns.
acc_model* ddp_model_whose_peer_fails_after(int steps, const std::string& mode) {
  acc_model* raw = nullptr;
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &raw), ACC_OK);
  acc_model* model = nullptr;
  EXPECT_EQ(acc_prepare_model(g_acc, raw, ACC_PLACEMENT_DEFAULT, &model), ACC_OK) << acc_last_error_message();
  auto [x, y] = job_batch(0);
  for (int step = 0; step < steps; ++step)
    train_step(model, nullptr, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8, true);
  fail_process_1_by(mode);
  return model;
}

// Process 0's side: the call failed as Timeout/Aborted naming `collective`; the group is broken, so
// the test ends here without a clean teardown.
void expect_named_and_exit(acc_status status, const std::string& collective) {
  const std::string message = acc_last_error_message();
  EXPECT_TRUE(status == ACC_ERR_TIMEOUT || status == ACC_ERR_ABORTED) << acc_status_name(status) << ": " << message;
  EXPECT_NE(message.find(collective), std::string::npos) << message;
  std::fflush(stdout);
  acc_test::exit_at_once(testing::Test::HasFailure() ? 1 : 0);
}

}  // namespace

// DDP's gradient allreduce runs inside acc_backward: a peer that dies or stalls before it is named
// as that collective, with the step, as Timeout/Aborted (not an internal error).
TEST(Fault, ADeadOrStalledPeerDuringBackwardIsNamed) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  // Two steps first: the second forward rebuilds DDP's buckets, with the peer.
  acc_model* model = ddp_model_whose_peer_fails_after(2, mode);
  auto [x, y] = job_batch(0);
  acc_tensor* xt = floats(rows_of(x, 3, 0, 8), {8, 3});
  acc_tensor* yt = floats(rows_of(y, 2, 0, 8), {8, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  yt = acc_test::on_device_of(out, yt);
  ASSERT_EQ(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  // PowerSGD's compressed reductions (from its iteration 2 under ACC_TEST_COMM_STATE) are its own
  // collectives, each named.
  const char* hook = std::getenv("ACC_TEST_COMM_HOOK");
  expect_named_and_exit(acc_backward(g_acc, loss), hook && std::string(hook) == "power_sgd"
                                                       ? "backward #3: collective 'DDP's PowerSGD allreduce"
                                                       : "backward #3 (DDP's gradient allreduce)");
}

// The same for a bf16 model on a Gloo without bfloat16 (before PyTorch 2.2), whose gradients the
// library's group reduces in float32: the reduction's failure reaches acc_backward, named.
TEST(Fault, ADeadOrStalledPeerDuringABf16BackwardIsNamed) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  acc_model *raw = nullptr, *model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &raw));
  ACC_ASSERT_OK(acc_model_to(raw, nullptr, ACC_DTYPE_BFLOAT16));
  ACC_ASSERT_OK(acc_prepare_model(g_acc, raw, ACC_PLACEMENT_DEFAULT, &model));
  auto [x, y] = job_batch(0);
  for (int step = 0; step < 2; ++step)
    bf16_backward(model, g_acc, rows_of(x, 3, g_rank * 8, 8), rows_of(y, 2, g_rank * 8, 8), 8);
  fail_process_1_by(mode);
  acc_tensor* xt = as_bf16(floats(rows_of(x, 3, 0, 8), {8, 3}));
  acc_tensor* yt = floats(rows_of(y, 2, 0, 8), {8, 2});
  acc_tensor *out = nullptr, *wide = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_tensor_to(out, nullptr, ACC_DTYPE_FLOAT32, &wide), ACC_OK);
  yt = acc_test::on_device_of(out, yt);
  ASSERT_EQ(acc_loss_mse(wide, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  expect_named_and_exit(acc_backward(g_acc, loss), "backward #3 (DDP's gradient allreduce)");
}

// LOMO averages each gradient inside backward, one allreduce per parameter: a peer gone by then is
// named as that collective, with the parameter.
TEST(Fault, ADeadOrStalledPeerDuringLomoBackwardIsNamed) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  ACC_ASSERT_OK(acc_optimizer_create(model, "lomo", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(g_acc, &model, &opt, nullptr, nullptr));
  auto [x, y] = job_batch(0);
  const auto loss_of_own_rows = [&, x = x, y = y](int64_t rank) {
    acc_tensor* xt = floats(rows_of(x, 3, rank * 8, 8), {8, 3});
    acc_tensor* yt = floats(rows_of(y, 2, rank * 8, 8), {8, 2});
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
    yt = acc_test::on_device_of(out, yt);
    EXPECT_EQ(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    return loss;
  };
  ACC_ASSERT_OK(acc_lomo_backward(g_acc, loss_of_own_rows(g_rank), 0.1));
  fail_process_1_by(mode);
  expect_named_and_exit(acc_lomo_backward(g_acc, loss_of_own_rows(0), 0.1), "LOMO's allreduce of the gradient of '");
}

// DDP rebuilds its buckets at the forward after the first averaged backward, a broadcast from rank
// 0: a peer gone by then is named as that collective.
TEST(Fault, ADeadOrStalledPeerAtTheBucketRebuildIsNamed) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  acc_model* model = ddp_model_whose_peer_fails_after(1, mode);
  auto [x, y] = job_batch(0);
  acc_tensor* xt = floats(rows_of(x, 3, 0, 8), {8, 3});
  acc_tensor* out = nullptr;
  expect_named_and_exit(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out),
                        "forward (DDP's gradient buckets, rebuilt");
}

// acc_profile_end writes this process's trace, then waits for the others: a peer gone by then is
// named as that wait, and the trace written is kept.
TEST(Fault, ADeadOrStalledPeerAtProfileEndIsNamed) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  if (!mode) GTEST_SKIP() << "set ACC_TEST_FAULT=exit or stall (the fault tests run on their own)";
  const std::string dir = std::string("/tmp/acc_dist_profile_fault_") + std::getenv("MASTER_PORT");
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_PROFILE, &o), ACC_OK);
  ASSERT_EQ(acc_options_set_string(o, "output_trace_dir", dir.c_str()), ACC_OK);
  ASSERT_EQ(acc_profile_begin(g_acc, o), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  fail_process_1_by(mode);
  const acc_status status = acc_profile_end(g_acc);
  const std::string message = acc_last_error_message();
  EXPECT_TRUE(status == ACC_ERR_TIMEOUT || status == ACC_ERR_ABORTED) << acc_status_name(status) << ": " << message;
  EXPECT_NE(message.find("profile end (waiting for every process's trace)"), std::string::npos) << message;
  EXPECT_TRUE(std::filesystem::exists(dir + "/profile_0.json"));
  std::filesystem::remove_all(dir);
  std::fflush(stdout);
  acc_test::exit_at_once(testing::Test::HasFailure() ? 1 : 0);
}

namespace {

// kDistNet prepared by the job's accelerator.
acc_model* prepared_dist_net() {
  acc_model* model = acc_test::spec_model(kDistNet);
  EXPECT_EQ(acc_prepare(g_acc, &model, nullptr, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  return model;
}

}  // namespace

// The collectives outside a training step (the loaders', the objects', checkpoints' and the scopes')
// with a peer that dies or stalls before them: Timeout/Aborted naming the call, on the process left.
TEST(Fault, ADeadOrStalledPeerIsNamedInEveryCollective) {
  const char* mode = std::getenv("ACC_TEST_FAULT");
  const char* at_env = std::getenv("ACC_TEST_FAULT_AT");
  if (!mode || !at_env) GTEST_SKIP() << "set ACC_TEST_FAULT and ACC_TEST_FAULT_AT (the fault tests run on their own)";
  const std::string at = at_env;
  // Each place: what both processes do first, then the call process 0 makes alone, and the name its
  // error must give.
  struct Place {
    std::function<void()> before;
    std::function<acc_status()> call;
    std::string named;
  };
  acc_dataset* ds = id_dataset(16);
  acc_dataloader* dl = nullptr;
  acc_model* model = nullptr;
  acc_tensor* t = floats({1.0f, 2.0f}, {2});
  acc_tensor* out = nullptr;
  acc_string_list* list = nullptr;
  acc_tensor_list* batch = nullptr;
  const std::string dir = std::string("/tmp/acc_dist_fault_state_") + std::getenv("MASTER_PORT");
  const std::map<std::string, Place> places = {
      // process 0 reads for both and sends each its slice
      {"dispatch",
       {[&] {
          dl = prepared_loader(ds, 2, acc_test::make_accelerator({{"dispatch_batches", "1"}}), true);
          ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
        },
        [&] { return acc_dataloader_next(dl, &batch); }, "collective 'dispatch_batches (header)'"}},
      // an epoch's shuffle takes process 0's generator state at its first batch
      {"shuffle",
       {[&] { dl = prepared_loader(ds, 2, g_acc, true); }, [&] { return acc_dataloader_next(dl, &batch); },
        "collective 'data loader shuffle (generator state)"}},
      {"prepare_optimizer",
       {[&] { model = prepared_dist_net(); },
        [&] {
          acc_optimizer* opt = nullptr;
          EXPECT_EQ(acc_optimizer_create(model, "sgd", nullptr, &opt), ACC_OK);
          return acc_prepare(g_acc, nullptr, &opt, nullptr, nullptr);
        },
        "collective 'prepare_optimizer (the optimizers compared)"}},
      {"load_state",
       {[&] {
          model = prepared_dist_net();
          ASSERT_EQ(acc_save_state(g_acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
        },
        [&] { return acc_load_state(g_acc, dir.c_str(), nullptr); }, "collective 'load_state (reading)"}},
      {"local_sgd",
       {[&] {
          model = prepared_dist_net();
          ASSERT_EQ(acc_local_sgd_begin(g_acc, model, 1, 1), ACC_OK) << acc_last_error_message();
        },
        [&] { return acc_local_sgd_step(g_acc, model); }, "collective 'LocalSGD (waiting for every process)"}},
      {"gather_for_metrics",
       {[] {}, [&] { return acc_gather_for_metrics(g_acc, t, "accuracy", &out); }, "collective 'accuracy"}},
      {"gather_object",
       {[] {}, [&] { return acc_gather_object(g_acc, "abc", 3, "labels", &list); }, "collective 'labels"}},
      {"broadcast_object",
       {[] {}, [&] { return acc_broadcast_object(g_acc, "abc", 3, 0, "vocabulary", &list); },
        "collective 'vocabulary"}},
      {"pad",
       {[] {}, [&] { return acc_pad_across_processes(g_acc, t, 0, 0.0, 0, "lengths", &out); }, "collective 'lengths"}},
      {"check_trigger",
       {[] {},
        [&] {
          int any = 0;
          return acc_check_trigger(g_acc, &any);
        },
        "collective 'check_trigger"}},
      {"main_process_first",
       {[] {},
        [&] {  // the main process goes first, and waits for the others at the end
          const acc_status begun = acc_main_process_first_begin(g_acc);
          return begun == ACC_OK ? acc_main_process_first_end(g_acc) : begun;
        },
        "collective 'main_process_first"}},  // (found by a hunt: named 'wait_for_everyone', a call never made)
  };
  const auto place = places.find(at);
  ASSERT_NE(place, places.end()) << "no fault place '" << at << "'";
  place->second.before();
  fail_process_1_by(mode);
  const acc_status status = place->second.call();
  std::filesystem::remove_all(dir);
  expect_named_and_exit(status, place->second.named);
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::AddGlobalTestEnvironment(new AcceleratorEnvironment);
  return RUN_ALL_TESTS();
}

// save_state / load_state on several processes: a run interrupted mid-epoch and resumed gives the
// same batches and bit-identical weights; a checkpoint one process cannot read fails on all of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../capi/support.h"
#include "job.h"

using acc_test::flat_floats;
using acc_test::floats;
using acc_test::longs;
using acc_test::to_floats;

namespace {

constexpr int64_t kSamples = 44, kBatch = 4;

// Dropout draws from each process's RNG, so only a restored RNG state gives the same masks.
const char* kNet = R"([{"type":"linear","in_features":4,"out_features":8},{"type":"tanh"},
                       {"type":"dropout","p":0.3},{"type":"linear","in_features":8,"out_features":2}])";

std::string shared_dir(const char* name) {
  return std::string("/tmp/acc_dist_") + name + "_" + std::getenv("MASTER_PORT");
}

// Sample i: id, features and targets as DistRun's tensor dataset, the features plus noise drawn from
// torch's generator on whichever thread the loader fetches it (a worker's own, if it has workers).
int noisy_sample(void*, int64_t i, acc_tensor_list** out) {
  const int64_t four[] = {4};
  acc_tensor* noise = nullptr;
  if (acc_tensor_rand(four, 1, &noise) != ACC_OK) return 1;
  std::vector<float> x = to_floats(noise), y;
  acc_tensor_free(noise);
  for (int f = 0; f < 4; ++f) x[f] = std::sin(0.3f * static_cast<float>(i * 4 + f)) + 0.1f * x[f];
  for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.2f * static_cast<float>(i + f)));
  acc_tensor* fields[] = {longs({i}, {}), floats(x, {4}), floats(y, {2})};
  acc_tensor_list* list = nullptr;
  bool ok = acc_tensor_list_create(&list) == ACC_OK;
  for (acc_tensor* t : fields) {
    ok = ok && acc_tensor_list_append(list, nullptr, t) == ACC_OK;
    acc_tensor_free(t);
  }
  *out = list;
  return ok ? 0 : 1;
}

// noisy_sample's samples in order as a stream (acc_dataset_from_iterator), each drawn when it is read.
struct NoisyStream {
  int64_t at = 0;
  static int next(void* user_data, acc_tensor_list** out) {
    auto* s = static_cast<NoisyStream*>(user_data);
    *out = nullptr;
    return s->at < kSamples ? noisy_sample(nullptr, s->at++, out) : 0;
  }
  static int start(void* user_data, int64_t) {
    static_cast<NoisyStream*>(user_data)->at = 0;
    return 0;
  }
};

// A model, AdamW with a schedule and an unseeded shuffling loader (ids, features, targets), prepared.
// With `noisy_workers` >= 0 the dataset is noisy_sample's, fetched on that many worker threads;
// with `generator_seed` >= 0 the loader has a generator of its own; with `noisy_stream` the dataset
// is NoisyStream (unshuffled).
struct DistRun {
  acc_accelerator* acc;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_scheduler* sched = nullptr;
  acc_dataloader* dl = nullptr;
  std::vector<int64_t> ids;  // the samples this process trained on, in order

  NoisyStream stream;

  explicit DistRun(acc_accelerator* accelerator = g_acc, int noisy_workers = -1, int64_t generator_seed = -1,
                   bool noisy_stream = false)
      : acc(accelerator) {
    EXPECT_EQ(acc_model_from_spec(kNet, &model), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_create(model, "adamw", nullptr, &opt), ACC_OK);
    acc_options* so = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &so), ACC_OK);
    EXPECT_EQ(acc_options_set_int(so, "num_training_steps", 100), ACC_OK);
    EXPECT_EQ(acc_scheduler_create(opt, "linear", so, &sched), ACC_OK);
    acc_options_free(so);
    std::vector<int64_t> id(kSamples);
    std::vector<float> x, y;
    for (int64_t i = 0; i < kSamples; ++i) {
      id[i] = i;
      for (int f = 0; f < 4; ++f) x.push_back(std::sin(0.3f * static_cast<float>(i * 4 + f)));
      for (int f = 0; f < 2; ++f) y.push_back(std::cos(0.2f * static_cast<float>(i + f)));
    }
    acc_tensor* it = longs(id, {kSamples});
    acc_tensor* xt = floats(x, {kSamples, 4});
    acc_tensor* yt = floats(y, {kSamples, 2});
    const acc_tensor* fields[] = {it, xt, yt};
    acc_dataset* ds = nullptr;
    if (noisy_stream)
      EXPECT_EQ(acc_dataset_from_iterator(NoisyStream::next, NoisyStream::start, &stream, nullptr, -1, &ds), ACC_OK);
    else if (noisy_workers >= 0)
      EXPECT_EQ(acc_dataset_from_callback(kSamples, noisy_sample, nullptr, nullptr, &ds), ACC_OK);
    else
      EXPECT_EQ(acc_dataset_from_tensors(fields, 3, &ds), ACC_OK);
    acc_options* lo = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &lo), ACC_OK);
    EXPECT_EQ(acc_options_set_int(lo, "batch_size", kBatch), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(lo, "shuffle", !noisy_stream), ACC_OK);
    EXPECT_EQ(acc_options_set_int(lo, "num_workers", std::max(noisy_workers, 0)), ACC_OK);
    if (generator_seed >= 0) EXPECT_EQ(acc_options_set_int(lo, "generator_seed", generator_seed), ACC_OK);
    EXPECT_EQ(acc_dataloader_create(ds, lo, &dl), ACC_OK);
    for (acc_tensor* t : {it, xt, yt}) acc_tensor_free(t);
    acc_dataset_free(ds);
    acc_options_free(lo);
    EXPECT_EQ(acc_prepare(acc, &model, &opt, &dl, &sched), ACC_OK) << acc_last_error_message();
  }
  ~DistRun() {
    acc_dataloader_free(dl);
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
    acc_model_free(model);
    EXPECT_EQ(acc_free_memory(acc), ACC_OK);  // the next run prepares its own objects
  }

  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      acc_tensor_list* batch = nullptr;
      ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
      if (!batch) ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK);
      ASSERT_NE(batch, nullptr);
      acc_tensor *id = nullptr, *x = nullptr, *y = nullptr, *out = nullptr, *loss = nullptr;
      ASSERT_EQ(acc_tensor_list_get(batch, 0, &id), ACC_OK);
      ASSERT_EQ(acc_tensor_list_get(batch, 1, &x), ACC_OK);
      ASSERT_EQ(acc_tensor_list_get(batch, 2, &y), ACC_OK);
      const auto batch_ids = acc_test::to_longs(id);
      ids.insert(ids.end(), batch_ids.begin(), batch_ids.end());
      ASSERT_EQ(acc_accumulate_begin(acc), ACC_OK);
      ASSERT_EQ(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
      ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
      ASSERT_EQ(acc_scheduler_step(sched), ACC_OK);
      ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      ASSERT_EQ(acc_accumulate_end(acc), ACC_OK);
      for (acc_tensor* t : {id, x, y, out, loss}) acc_tensor_free(t);
      acc_tensor_list_free(batch);
    }
  }

  std::vector<float> weights() const {
    acc_tensor_list* state = nullptr;
    EXPECT_EQ(acc_get_state_dict(acc, model, 1, &state), ACC_OK) << acc_last_error_message();
    return flat_floats(state);
  }
};

// Trains `first` + `rest` steps in one go, then `first`, saves, and resumes in a fresh run for `rest`
// (RNG reseeded per process, as a new job would be): the same batches and bit-identical weights.
// Both runs start by skipping `skip` batches (skip_first_batches); the resumed one does not.
void expect_exact_resume(acc_accelerator* acc, const char* name, int first, int rest, int noisy_workers = -1,
                         int64_t generator_seed = -1, bool noisy_stream = false, int64_t skip = 0) {
  const std::string dir = shared_dir(name);
  ACC_ASSERT_OK(acc_set_seed(11));
  std::vector<int64_t> whole_ids;
  std::vector<float> whole_weights;
  {
    DistRun whole(acc, noisy_workers, generator_seed, noisy_stream);
    ACC_ASSERT_OK(acc_dataloader_skip_first_batches(whole.dl, skip));
    whole.train(first + rest);
    whole_ids = whole.ids;
    whole_weights = whole.weights();
  }
  ACC_ASSERT_OK(acc_set_seed(11));
  std::vector<int64_t> ids;
  {
    DistRun head(acc, noisy_workers, generator_seed, noisy_stream);
    ACC_ASSERT_OK(acc_dataloader_skip_first_batches(head.dl, skip));
    head.train(first);
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
    ids = head.ids;
  }
  ACC_ASSERT_OK(acc_set_seed(1000 + static_cast<uint64_t>(g_rank)));
  DistRun tail(acc, noisy_workers, generator_seed, noisy_stream);
  ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
  tail.train(rest);
  ids.insert(ids.end(), tail.ids.begin(), tail.ids.end());
  EXPECT_EQ(ids, whole_ids) << "process " << g_rank << " saw other batches after resuming";
  EXPECT_EQ(tail.weights(), whole_weights) << "process " << g_rank;
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

int64_t batches_per_epoch() { return (kSamples + kBatch * g_world - 1) / (kBatch * g_world); }

}  // namespace

TEST(Checkpoint, ResumedRunMatchesTheUninterruptedOneBitForBit) {
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  expect_exact_resume(g_acc, "resume", per_epoch + 1, per_epoch + 2);  // saved mid-epoch, resumed past its end
}

TEST(Checkpoint, ResumeIsExactWhenLoaderWorkersDrawRandomNumbers) {
  // Noise drawn in the dataset on 2 worker threads: each process's workers are seeded from the
  // epoch's base seed and the checkpoint keeps their states; with dispatch_batches process 0's
  // loader reads the resumed epoch again from its start, its workers seeded as before. Without
  // workers, from the global generator, each batch fetched before the step on the one before it.
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  acc_accelerator* dispatching = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  for (int workers : {2, 0}) {
    SCOPED_TRACE("num_workers " + std::to_string(workers));
    expect_exact_resume(g_acc, "resume_workers", per_epoch + 1, per_epoch + 2, workers);
    expect_exact_resume(dispatching, "resume_workers_dispatch", per_epoch + 1, per_epoch + 2, workers);
  }
  acc_accelerator_free(dispatching);
}

TEST(Checkpoint, ResumeIsExactAfterADispatchedSkipLeftItsBatchesUnread) {
  // Dispatched over a map-style dataset, a skip leaves its batches unread (as Accelerate's sampler
  // skips them): the checkpoint says how many, so the resumed epoch skips those unread again and
  // reads the rest (its workers drawing as before, its last batch padded from the first one read).
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  acc_accelerator* dispatching = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  for (int workers : {2, 0}) {
    SCOPED_TRACE("num_workers " + std::to_string(workers));
    expect_exact_resume(dispatching, "resume_unread_skip", 2, per_epoch + 2, workers, -1, false, 1);
  }
  acc_accelerator_free(dispatching);
}

TEST(Checkpoint, ResumeIsExactWhenAStreamDrawsRandomNumbers) {
  // Noise drawn as a stream is read: sharded, every process reads the resumed epoch's skipped batches
  // again; dispatched, process 0 does. The first batch (which pads the last round) and the one read
  // ahead are read under the states they were first read under. Saved mid-epoch, resumed past its end.
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  acc_accelerator* sharding = acc_test::make_accelerator({{"dispatch_batches", "0"}});  // streams dispatch by default
  for (acc_accelerator* acc : {sharding, g_acc})
    for (int first : {1, per_epoch + 1}) {
      SCOPED_TRACE(std::string(acc == sharding ? "sharded" : "dispatched") + ", saved after " + std::to_string(first));
      expect_exact_resume(acc, "resume_stream", first, per_epoch + 2, -1, -1, true);
    }
  acc_accelerator_free(sharding);
}

TEST(Checkpoint, ResumeIsExactWithALoadersOwnGenerator) {
  // generator_seed: the synchronized shuffle and the base seeds come from the loader's generator,
  // whose state the checkpoint keeps (process 0's base loader's, dispatched); mid-epoch and at the
  // end of one.
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  acc_accelerator* dispatching = acc_test::make_accelerator({{"dispatch_batches", "1"}});
  for (acc_accelerator* acc : {g_acc, dispatching})
    for (int first : {per_epoch + 1, per_epoch}) {
      SCOPED_TRACE(std::string(acc == g_acc ? "sharded" : "dispatched") + ", saved after " + std::to_string(first));
      expect_exact_resume(acc, "resume_generator", first, per_epoch + 2, 2, 77);
    }
  acc_accelerator_free(dispatching);
}

TEST(Checkpoint, ResumeIsExactWithBf16AndAccumulation) {
  acc_accelerator* acc = acc_test::make_accelerator({{"mixed_precision", "bf16"}, {"gradient_accumulation_steps", "2"}});
  // Saved at a window's end (the window restarts with each epoch): the second batch of epoch 1.
  const auto per_epoch = static_cast<int>(batches_per_epoch());
  expect_exact_resume(acc, "resume_bf16", per_epoch + 2, per_epoch + 3);
  acc_accelerator_free(acc);
}

TEST(Checkpoint, AFileOneProcessCannotReadFailsTheLoadEverywhere) {
  if (g_world < 2) GTEST_SKIP() << "needs two processes";
  const std::string dir = shared_dir("broken");
  DistRun run;
  ACC_ASSERT_OK(acc_save_state(g_acc, dir.c_str(), nullptr));
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove(dir + "/random_states_1.safetensors");
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  const auto before = run.weights();
  ACC_EXPECT_ERROR(acc_load_state(g_acc, dir.c_str(), nullptr), ACC_ERR_IO, "process 1");
  EXPECT_EQ(run.weights(), before);
  run.train(1);  // the job goes on: nobody is stuck in a collective
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

// python_state_files on several processes: the shared files once, each process's random states in
// its own random_states_<rank>.pkl (as Accelerate's), and the library's own load still reads its files.
TEST(Checkpoint, PythonStateFilesGiveEveryProcessItsRandomStates) {
  const std::string dir = shared_dir("python_files");
  acc_accelerator* acc = acc_test::make_accelerator({{"python_state_files", "1"}});
  std::vector<float> saved;
  {
    DistRun run(acc);
    run.train(2);
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
    ACC_ASSERT_OK(acc_wait_for_everyone(acc));
    for (const char* shared : {"optimizer.bin", "scheduler.bin", "model.safetensors"})
      EXPECT_TRUE(std::filesystem::exists(dir + "/" + shared)) << shared;
    for (int64_t rank = 0; rank < g_world; ++rank)
      EXPECT_TRUE(std::filesystem::exists(dir + "/random_states_" + std::to_string(rank) + ".pkl")) << rank;
    EXPECT_FALSE(std::filesystem::exists(dir + "/random_states_" + std::to_string(g_world) + ".pkl"));
    saved = run.weights();
  }
  const std::vector<float> draws = acc_test::next_global_draws();  // where this process's stream stood
  {
    DistRun resumed(acc);
    ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
    EXPECT_EQ(resumed.weights(), saved);
    ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  }
  // The same folder as Python Accelerate leaves it (the library's own files taken out): each process
  // reads its own random_states_<rank>.pkl.
  if (g_rank == 0)
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      const std::string extension = entry.path().extension().string();
      if (name != "model.safetensors" && (extension == ".safetensors" || extension == ".json"))
        std::filesystem::remove_all(entry.path());
    }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  {
    DistRun resumed(acc);
    acc_test::next_global_draws();  // the stream moved on, which the load sets back
    ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
    EXPECT_EQ(resumed.weights(), saved);
    EXPECT_EQ(acc_test::next_global_draws(), draws);
    ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  }
  acc_accelerator_free(acc);
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

// Processes loading different checkpoints would each restore its own: the replicas would differ
// without an error. The saves' ids differ, and every process refuses before anything changes.
TEST(Checkpoint, ProcessesLoadingDifferentCheckpointsAreRefused) {
  if (g_world < 2) GTEST_SKIP() << "needs two processes";
  const std::string first = shared_dir("first"), second = shared_dir("second");
  {
    DistRun saved;
    ACC_ASSERT_OK(acc_save_state(g_acc, first.c_str(), nullptr));
    saved.train(1);
    ACC_ASSERT_OK(acc_save_state(g_acc, second.c_str(), nullptr));
  }
  DistRun run;  // a new run, before iterating its loader
  const auto before = run.weights();
  const std::string& mine = g_rank == g_world - 1 ? second : first;
  ACC_EXPECT_ERROR(acc_load_state(g_acc, mine.c_str(), nullptr), ACC_ERR_IO,
                   "the processes' own files hold states that must agree and do not: process 0 has save id");
  EXPECT_EQ(run.weights(), before);
  run.train(1);  // still in step
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove_all(first), std::filesystem::remove_all(second);
}

namespace {

int take_out_first_on_last_process(void*, acc_checkpoint_models* models, const char*) {
  if (g_rank != g_world - 1) return 0;
  return acc_checkpoint_models_remove(models, 0) == ACC_OK ? 0 : 1;
}

}  // namespace

// Processes whose pre-hooks take out different models would write or load different weight files:
// the save and the load are refused on every process, before anything changes, and the job goes on.
TEST(Checkpoint, ProcessesWhoseHooksTakeOutDifferentModelsAreRefused) {
  if (g_world < 2) GTEST_SKIP() << "needs two processes";
  const std::string dir = shared_dir("hooks_disagree");
  DistRun run;
  uint64_t id = 0;
  ACC_ASSERT_OK(acc_register_save_state_models_pre_hook(g_acc, take_out_first_on_last_process, nullptr, nullptr, &id));
  ACC_EXPECT_ERROR(acc_save_state(g_acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "every process's hooks must take out the same models");
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));  // the process that made the folder for the hooks removed it
  EXPECT_FALSE(std::filesystem::exists(dir));
  ACC_ASSERT_OK(acc_remove_state_pre_hook(g_acc, id));
  ACC_ASSERT_OK(acc_save_state(g_acc, dir.c_str(), nullptr));
  const auto before = run.weights();
  ACC_ASSERT_OK(acc_register_load_state_models_pre_hook(g_acc, take_out_first_on_last_process, nullptr, nullptr, &id));
  ACC_EXPECT_ERROR(acc_load_state(g_acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT, "pre-hooks leave models");
  ACC_ASSERT_OK(acc_remove_state_pre_hook(g_acc, id));
  EXPECT_EQ(run.weights(), before);
  run.train(1);  // still in step
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

namespace {

int save_nothing(void*, acc_bytes*) { return 0; }
int load_nothing(void*, const void*, size_t) { return 0; }

}  // namespace

// Found by a hunt: where only some processes register an object, the main process saved its own count
// and the checkpoint could not be loaded by the same job. The save is refused on every process, before
// anything is written, and the job goes on.
TEST(Checkpoint, ProcessesThatRegisterDifferentObjectsAreRefusedAtSave) {
  if (g_world < 2) GTEST_SKIP() << "needs two processes";
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = shared_dir("objects_disagree");
  {
    DistRun run(acc);
    if (g_rank == g_world - 1)
      ACC_ASSERT_OK(acc_register_for_checkpointing(acc, save_nothing, load_nothing, nullptr, nullptr));
    ACC_EXPECT_ERROR(acc_save_state(acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "process 0 saves 0 custom_objects and process " + std::to_string(g_world - 1) + " saves 1");
    ACC_ASSERT_OK(acc_wait_for_everyone(acc));
    EXPECT_FALSE(std::filesystem::exists(dir));
    run.train(1);  // still in step
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  acc_accelerator_free(acc);
}

// DDP's buckets, rebuilt in the order of the first averaged backward's gradients, decide how Gloo
// rounds the sums on more than 2 processes: the manifest keeps them (null before the rebuild), and a
// layout that is not one of the model's parameters is refused before anything changes.
TEST(Checkpoint, DdpBucketLayoutIsSavedAndABadOneIsRefused) {
  const std::string dir = shared_dir("buckets");
  auto saved_layouts = [&] {
    EXPECT_EQ(acc_wait_for_everyone(g_acc), ACC_OK);
    return nlohmann::json::parse(acc_test::read_file(dir + "/accelerate_state.json"))["ddp_buckets"];
  };
  {
    DistRun run;
    ACC_ASSERT_OK(acc_save_state(g_acc, dir.c_str(), nullptr));
    EXPECT_EQ(saved_layouts(), nlohmann::json::parse("[null]")) << "saved before any step";
    run.train(1);  // the rebuild is due at the next forward; save_state does it first
    ACC_ASSERT_OK(acc_save_state(g_acc, dir.c_str(), nullptr));
  }
  const nlohmann::json layouts = saved_layouts();
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));  // every process has read it before it is rewritten
  ASSERT_TRUE(layouts.is_array() && layouts.size() == 1 && layouts[0].is_array()) << layouts.dump();
  std::vector<size_t> order;
  for (const auto& bucket : layouts[0])
    for (const auto& index : bucket) order.push_back(index.get<size_t>());
  EXPECT_NE(order, (std::vector<size_t>{0, 1, 2, 3})) << "the backward produces the last layer's gradients first";
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3})) << "each trainable parameter once";

  if (g_rank == 0) {
    auto manifest = nlohmann::json::parse(acc_test::read_file(dir + "/accelerate_state.json"));
    manifest["ddp_buckets"] = nlohmann::json::parse("[[[0, 0, 1, 2]]]");
    std::ofstream(dir + "/accelerate_state.json", std::ios::trunc) << manifest.dump();
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  DistRun fresh;
  const auto before = fresh.weights();
  ACC_EXPECT_ERROR(acc_load_state(g_acc, dir.c_str(), nullptr), ACC_ERR_IO, "more than one DDP bucket");
  EXPECT_NE(std::string(acc_last_error_message()).find("accelerate_state.json"), std::string::npos)
      << acc_last_error_message();
  EXPECT_EQ(fresh.weights(), before);
  fresh.train(1);  // the job goes on
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
}

TEST(Checkpoint, SaveOnEachNodeGivesEveryNodeACompleteCheckpoint) {
  // Each node's local main writes the shared files into the node's folder: on a cluster the same
  // path on each node's own disk; here, where simulated nodes share one disk, a folder per node.
  acc_accelerator* acc = acc_test::make_accelerator({{"save_on_each_node", "true"}});
  const std::string dir = shared_dir("each_node") + "_node" + std::getenv("GROUP_RANK");
  std::vector<float> saved;
  {
    DistRun run(acc);
    run.train(2);
    saved = run.weights();
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  for (const char* name : {"accelerate_state.json", "model.safetensors", "optimizer.safetensors", "scheduler.json"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name)) << dir << " lacks " << name;
  EXPECT_TRUE(std::filesystem::exists(dir + "/random_states_" + std::to_string(g_rank) + ".safetensors"));
  {
    DistRun fresh(acc);
    ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));  // every process reads its node's copy
    EXPECT_EQ(fresh.weights(), saved);
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  int local_main = 0;
  ACC_ASSERT_OK(acc_accelerator_is_local_main_process(acc, &local_main));
  if (local_main) std::filesystem::remove_all(dir);
  acc_accelerator_free(acc);
}

TEST(Checkpoint, SaveOnEachNodeIntoAFolderTheNodesShare) {
  // A shared file system (NFS on a cluster; here the simulated nodes' one disk): every node's local
  // main wrote and renamed the same staging folder, so all but the first failed (ACC_ERR_IO). The
  // one that shares the main process's folder now leaves the shared files to it, as Accelerate's
  // writers end with the same files, and each process's own files still go in.
  acc_accelerator* acc = acc_test::make_accelerator({{"save_on_each_node", "true"}});
  const std::string dir = shared_dir("each_node_shared");
  std::vector<float> saved;
  for (int round = 0; round < 2; ++round) {  // the second save replaces the first
    DistRun run(acc);
    run.train(2);
    saved = run.weights();
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  EXPECT_TRUE(std::filesystem::exists(dir + "/random_states_" + std::to_string(g_rank) + ".safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/.accelerate_staging_owner"));
  {
    DistRun fresh(acc);
    ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
    EXPECT_EQ(fresh.weights(), saved);
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(acc));
  if (g_rank == 0) std::filesystem::remove_all(dir);
  acc_accelerator_free(acc);
}

// A peer gone after the main process published the checkpoint (in the save's last exchange of
// outcomes): the save fails, and its message says that the new checkpoint is there, complete, and
// replaced the earlier one, which a caller would otherwise believe intact.
TEST(Fault, APeerGoneAfterThePublishIsToldTheNewCheckpointIsThere) {
  if (!std::getenv("ACC_TEST_PUBLISH_MATCH")) GTEST_SKIP() << "run by dist_fault_after_publish (tests/dist/publish_fault.c)";
  const std::string dir = shared_dir("published");
  DistRun run;
  ACC_ASSERT_OK(acc_save_state(g_acc, dir.c_str(), nullptr));
  run.train(1);
  if (g_rank == 1) {
    std::signal(SIGUSR1, [](int) { _exit(0); });  // process 0 sends it once the folder is published
    std::ofstream(dir + ".peer_pid") << getpid();
  }
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  const acc_status status = acc_save_state(g_acc, dir.c_str(), nullptr);
  ASSERT_EQ(g_rank, 0) << "process 1 ends inside the save";
  const std::string message = acc_last_error_message();
  EXPECT_TRUE(status == ACC_ERR_ABORTED || status == ACC_ERR_TIMEOUT) << acc_status_name(status) << ": " << message;
  EXPECT_NE(message.find("save_state (completing"), std::string::npos) << message;
  EXPECT_NE(message.find("the checkpoint '" + dir + "' was written complete and replaced what was there"),
            std::string::npos)
      << message;
  const auto manifest = nlohmann::json::parse(acc_test::read_file(dir + "/accelerate_state.json"));
  EXPECT_TRUE(manifest.contains("save_id"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir + ".peer_pid");
  std::fflush(stdout);
  acc_test::exit_at_once(testing::Test::HasFailure() ? 1 : 0);  // the group is broken: no clean teardown to wait for
}

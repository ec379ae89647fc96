// Datasets (tensors, memory-mapped files, IDX files) and data loaders.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "support.h"

using acc_test::floats;
using acc_test::longs;
using acc_test::temp_path;

namespace {

const std::string kFashion =
    std::getenv("ACC_FASHION_MNIST_DIR") ? std::getenv("ACC_FASHION_MNIST_DIR") : "/usr/share/datasets/fashion-mnist";

bool have_fashion() { return std::ifstream(kFashion + "/t10k-labels-idx1-ubyte.gz").good(); }

// A dataset of n samples: feature i is the float i, label i is the int i.
acc_dataset* counting_dataset(int64_t n) {
  std::vector<float> xs(static_cast<size_t>(n));
  std::vector<int64_t> ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i), ys[i] = i;
  acc_tensor* x = floats(xs, {n, 1});
  acc_tensor* y = longs(ys, {n});
  const acc_tensor* fields[] = {x, y};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 2, &ds), ACC_OK) << acc_last_error_message();
  acc_tensor_free(x);
  acc_tensor_free(y);
  return ds;
}

acc_dataloader* loader(acc_dataset* ds, std::initializer_list<std::pair<const char*, const char*>> items) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  for (auto& kv : items) EXPECT_EQ(acc_options_set(o, kv.first, kv.second), ACC_OK) << acc_last_error_message();
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return dl;
}

// A JSON file tests/data/export_shuffles.py writes (PyTorch's own answers); null when it is missing.
nlohmann::json shuffle_fixture(const std::string& name) {
  const std::string text = acc_test::read_file(acc_test::data_dir() + "/" + name);
  return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
}

// Field `field` (as T) of each batch of one epoch.
template <typename T>
std::vector<std::vector<T>> epoch_of(acc_dataloader* dl, size_t field) {
  std::vector<std::vector<T>> out;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
    if (!batch) break;
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_get(batch, field, &t), ACC_OK);
    out.push_back(acc_test::to_host<T>(t));
    acc_tensor_free(t);
    acc_tensor_list_free(batch);
  }
  return out;
}

// The labels of each batch of one epoch.
std::vector<std::vector<int64_t>> epoch(acc_dataloader* dl) { return epoch_of<int64_t>(dl, 1); }

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

}  // namespace

TEST(Dataset, FromTensorsChecksLengthsAndGetsSamples) {
  acc_dataset* ds = counting_dataset(10);
  int64_t size = 0;
  ACC_ASSERT_OK(acc_dataset_size(ds, &size));
  EXPECT_EQ(size, 10);
  acc_tensor_list* sample = nullptr;
  ACC_ASSERT_OK(acc_dataset_get(ds, 7, &sample));
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_get(sample, 1, &y));
  EXPECT_EQ(acc_test::item(y), 7.0);
  acc_tensor_free(y);
  acc_tensor_list_free(sample);
  ACC_EXPECT_ERROR(acc_dataset_get(ds, 10, &sample), ACC_ERR_INVALID_ARGUMENT, "index 10 is out of range");
  acc_dataset* sub = nullptr;
  ACC_ASSERT_OK(acc_dataset_subset(ds, 2, 5, &sub));
  ACC_ASSERT_OK(acc_dataset_size(sub, &size));
  EXPECT_EQ(size, 5);
  ACC_EXPECT_ERROR(acc_dataset_subset(ds, 8, 5, &sub), ACC_ERR_INVALID_ARGUMENT, "outside");
  acc_dataset_free(sub);

  acc_tensor* a = floats({1, 2, 3}, {3});
  acc_tensor* b = floats({1, 2}, {2});
  const acc_tensor* mismatched[] = {a, b};
  acc_dataset* bad = nullptr;
  ACC_EXPECT_ERROR(acc_dataset_from_tensors(mismatched, 2, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "field 1 has 2 samples but field 0 has 3");
  ACC_EXPECT_ERROR(acc_dataset_from_tensors(mismatched, 0, &bad), ACC_ERR_INVALID_ARGUMENT, "at least one field");
  acc_tensor_free(a);
  acc_tensor_free(b);
  acc_dataset_free(ds);
}

TEST(DataLoader, SequentialOrderBatchesAndDropLast) {
  acc_dataset* ds = counting_dataset(10);
  acc_dataloader* dl = loader(ds, {{"batch_size", "4"}});
  int64_t length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, 3);
  auto batches = epoch(dl);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{8, 9}));
  int64_t e = -1;
  ACC_ASSERT_OK(acc_dataloader_epoch(dl, &e));
  EXPECT_EQ(e, 1);  // the next epoch starts on the next call
  EXPECT_EQ(epoch(dl).size(), 3u);
  acc_dataloader_free(dl);

  dl = loader(ds, {{"batch_size", "4"}, {"drop_last", "true"}, {"num_workers", "0"}});
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, 2);
  EXPECT_EQ(epoch(dl).size(), 2u);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, EndOfEpochIsFlaggedOnTheLastBatch) {
  acc_dataset* ds = counting_dataset(5);
  acc_dataloader* dl = loader(ds, {{"batch_size", "2"}});
  std::vector<int> flags;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    if (!batch) break;
    int end = -1;
    ACC_ASSERT_OK(acc_dataloader_end_of_epoch(dl, &end));
    flags.push_back(end);
    acc_tensor_list_free(batch);
  }
  EXPECT_EQ(flags, (std::vector<int>{0, 0, 1}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, SeededShufflePermutesReproduciblyPerEpoch) {
  acc_dataset* ds = counting_dataset(50);
  acc_dataloader* a = loader(ds, {{"batch_size", "50"}, {"shuffle", "1"}, {"seed", "42"}});
  acc_dataloader* b = loader(ds, {{"batch_size", "50"}, {"shuffle", "1"}, {"seed", "42"}, {"num_workers", "3"}});
  auto a0 = epoch(a)[0], a1 = epoch(a)[0];
  auto b0 = epoch(b)[0];
  EXPECT_EQ(a0, b0);  // same seed, same epoch: same order, whatever the number of workers
  EXPECT_NE(a0, a1);  // a new epoch reshuffles (seed + epoch)
  EXPECT_EQ(std::set<int64_t>(a0.begin(), a0.end()).size(), 50u);
  std::vector<int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, a0);
  ACC_ASSERT_OK(acc_dataloader_set_epoch(b, 1));  // replaying epoch 1 gives epoch 1's order
  EXPECT_EQ(epoch(b)[0], a1);
  acc_dataloader_free(a);
  acc_dataloader_free(b);
  acc_dataset_free(ds);
}

TEST(DataLoader, UnseededShuffleFollowsSetSeed) {
  acc_dataset* ds = counting_dataset(30);
  ACC_ASSERT_OK(acc_set_seed(3));
  acc_dataloader* a = loader(ds, {{"batch_size", "30"}, {"shuffle", "1"}});
  auto first = epoch(a)[0];
  ACC_ASSERT_OK(acc_set_seed(3));
  acc_dataloader* b = loader(ds, {{"batch_size", "30"}, {"shuffle", "1"}});
  EXPECT_EQ(epoch(b)[0], first);
  acc_dataloader_free(a);
  acc_dataloader_free(b);
  acc_dataset_free(ds);
}

TEST(DataLoader, EachEpochTakesTheDrawOfATorchIterator) {
  // PyTorch's own loaders after torch.manual_seed (tests/data/export_shuffles.py): every epoch's
  // iterator draws a base seed from the global generator before the sampler draws its own.
  const auto expected = shuffle_fixture("loader_stream.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  const int64_t n = expected["samples"];
  acc_dataset* ds = counting_dataset(n);
  ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
  acc_dataloader* first = loader(ds, {{"batch_size", "5"}, {"shuffle", "1"}});
  for (const auto& order : expected["epochs"]) {
    std::vector<int64_t> got;
    for (const auto& batch : epoch(first)) got.insert(got.end(), batch.begin(), batch.end());
    EXPECT_EQ(got, order.get<std::vector<int64_t>>());
  }
  acc_dataloader* second = loader(ds, {{"batch_size", std::to_string(n).c_str()}, {"shuffle", "1"}});
  EXPECT_EQ(epoch(second)[0], expected["later"].get<std::vector<int64_t>>());
  acc_dataloader_free(first);
  acc_dataloader_free(second);
  acc_dataset_free(ds);
}

namespace {
// The labels of `dl`'s next batch (empty at the end of its epoch).
std::vector<int64_t> next_labels(acc_dataloader* dl) {
  acc_tensor_list* batch = nullptr;
  EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
  if (!batch) return {};
  acc_tensor* labels = nullptr;
  EXPECT_EQ(acc_tensor_list_get(batch, 1, &labels), ACC_OK);
  auto out = acc_test::to_host<int64_t>(labels);
  acc_tensor_free(labels);
  acc_tensor_list_free(batch);
  return out;
}
}  // namespace

TEST(DataLoader, LoadersReadInStepDrawAsPythonsZipWhenTheirIteratorsAreMadeFirst) {
  // PyTorch's zip(dl0, dl1) after torch.manual_seed (export_shuffles.py): both iterators draw their
  // base seeds before either's first batch, an unseeded sampler its own at its first batch (with
  // workers when its iterator is made). acc_dataloader_iter is the moment the iterator is made.
  const auto expected = shuffle_fixture("zipped.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  acc_dataset* ds = counting_dataset(expected["samples"].get<int64_t>());
  const std::string batch_size = std::to_string(expected["batch_size"].get<int64_t>());
  for (const auto& c : expected["cases"]) {
    const auto workers = c["workers"].get<std::vector<int>>();
    SCOPED_TRACE("workers " + std::to_string(workers[0]) + ", " + std::to_string(workers[1]));
    ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
    std::vector<acc_dataloader*> loaders;
    for (int w : workers) {
      const std::string count = std::to_string(w);
      loaders.push_back(
          loader(ds, {{"batch_size", batch_size.c_str()}, {"shuffle", "1"}, {"num_workers", count.c_str()}}));
    }
    for (const auto& expected_epoch : c["epochs"]) {
      for (acc_dataloader* dl : loaders) ACC_ASSERT_OK(acc_dataloader_iter(dl));
      std::vector<std::vector<int64_t>> orders(2);
      for (;;) {  // zip: stops at the first loader's end, the second's epoch then left at its last batch
        auto first = next_labels(loaders[0]);
        if (first.empty()) break;
        auto second = next_labels(loaders[1]);
        orders[0].insert(orders[0].end(), first.begin(), first.end());
        orders[1].insert(orders[1].end(), second.begin(), second.end());
      }
      for (acc_dataloader* dl : loaders) ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));  // zip's iterators dropped
      EXPECT_EQ(orders[0], expected_epoch[0].get<std::vector<int64_t>>());
      EXPECT_EQ(orders[1], expected_epoch[1].get<std::vector<int64_t>>());
    }
    const std::string whole = std::to_string(expected["samples"].get<int64_t>());
    acc_dataloader* later = loader(ds, {{"batch_size", whole.c_str()}, {"shuffle", "1"}});
    EXPECT_EQ(epoch(later)[0], c["later"].get<std::vector<int64_t>>());
    acc_dataloader_free(later);
    for (acc_dataloader* dl : loaders) acc_dataloader_free(dl);
  }
  acc_dataset_free(ds);
}

TEST(DataLoader, AnIteratorMadeAgainOrDroppedBeforeItsFirstBatchKeepsItsDraws) {
  // Python: iter(dl) twice draws two base seeds; an iterator dropped unused still took its draw.
  // Without the iterators the epoch orders follow from one draw each; with them, from the later ones.
  acc_dataset* ds = counting_dataset(24);
  auto order_after = [&](const std::function<void(acc_dataloader*)>& before, bool prepared = false) {
    EXPECT_EQ(acc_set_seed(5), ACC_OK);
    acc_dataloader* dl = loader(ds, {{"batch_size", "24"}, {"shuffle", "1"}});
    acc_accelerator* acc = prepared ? acc_test::make_accelerator({{"cpu", "1"}}) : nullptr;
    if (acc) EXPECT_EQ(acc_prepare(acc, nullptr, nullptr, &dl, nullptr), ACC_OK);
    before(dl);
    auto order = epoch(dl)[0];
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
    return order;
  };
  auto draw = [] {  // what creating a torch DataLoader iterator draws (64 bits), by hand
    acc_tensor* t = nullptr;
    const int64_t two[] = {2};  // two floats take 32 bits each
    EXPECT_EQ(acc_tensor_rand(two, 1, &t), ACC_OK);
    acc_tensor_free(t);
  };
  const auto plain = order_after([](acc_dataloader*) {});
  const auto made_twice = order_after([](acc_dataloader* dl) {
    EXPECT_EQ(acc_dataloader_iter(dl), ACC_OK);
    EXPECT_EQ(acc_dataloader_iter(dl), ACC_OK);
  });
  const auto dropped = order_after([](acc_dataloader* dl) {
    EXPECT_EQ(acc_dataloader_iter(dl), ACC_OK);
    EXPECT_EQ(acc_dataloader_end_epoch(dl), ACC_OK);
  });
  EXPECT_NE(made_twice, plain);
  EXPECT_EQ(made_twice, dropped);  // either way one draw more than the epoch's own
  EXPECT_EQ(made_twice, order_after([&](acc_dataloader*) { draw(); }));
  // A prepared loader's iterator (Accelerate's is a generator) draws nothing before its first batch.
  const auto prepared = order_after([](acc_dataloader*) {}, true);
  EXPECT_EQ(order_after([](acc_dataloader* dl) { EXPECT_EQ(acc_dataloader_iter(dl), ACC_OK); }, true), prepared);
  // In an epoch it is refused; the epoch goes on.
  acc_dataloader* dl = loader(ds, {{"batch_size", "6"}});
  EXPECT_EQ(next_labels(dl), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  ACC_EXPECT_ERROR(acc_dataloader_iter(dl), ACC_ERR_INVALID_ARGUMENT, "end it");
  EXPECT_EQ(next_labels(dl), (std::vector<int64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(acc_dataloader_iter(nullptr), ACC_ERR_INVALID_HANDLE);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

namespace {
// Sample i of tests/data/export_shuffles.py's Drawing dataset: i, then two numbers from torch's generator.
int drawing_sample(void*, int64_t index, acc_tensor_list** out) {
  const int64_t two[] = {2};
  acc_tensor* drawn = nullptr;
  if (acc_tensor_rand(two, 1, &drawn) != ACC_OK) return 1;
  std::vector<float> values = {static_cast<float>(index)};
  for (float v : acc_test::to_floats(drawn)) values.push_back(v);
  acc_tensor_free(drawn);
  acc_tensor* sample = floats(values, {3});
  acc_tensor_list* list = nullptr;
  const bool ok = acc_tensor_list_create(&list) == ACC_OK && acc_tensor_list_append(list, "x", sample) == ACC_OK;
  acc_tensor_free(sample);
  *out = list;
  return ok ? 0 : 1;
}

// The Drawing dataset of a fixture's "samples" samples.
acc_dataset* drawing_dataset(const nlohmann::json& fixture) {
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_callback(fixture["samples"].get<int64_t>(), drawing_sample, nullptr, nullptr, &ds),
            ACC_OK);
  return ds;
}

// Numbers written by Python's float.hex(), which strtod reads exactly.
std::vector<float> python_floats(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values) out.push_back(static_cast<float>(std::strtod(v.get<std::string>().c_str(), nullptr)));
  return out;
}

// The batches of one epoch, as floats.
std::vector<std::vector<float>> float_epoch(acc_dataloader* dl) { return epoch_of<float>(dl, 0); }

void expect_batches(const std::vector<std::vector<float>>& got, const nlohmann::json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < got.size(); ++b) EXPECT_EQ(got[b], python_floats(want[b])) << "batch " << b;
}
}  // namespace

namespace {
// loader_generator.json's cases of `group` (num_workers, shuffle: three epochs, then the global
// draws): each through a loader with the fixture's generator, prepared by an accelerator of
// `accelerator_options` if any.
void expect_generator_cases(const char* group, std::vector<std::pair<std::string, std::string>> accelerator_options) {
  const auto expected = shuffle_fixture("loader_generator.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  ASSERT_TRUE(expected.contains(group)) << "rerun the export_pytorch_shuffles fixture";
  acc_dataset* ds = drawing_dataset(expected);
  const std::string generator_seed = std::to_string(expected["generator_seed"].get<int64_t>());
  for (const auto& [name, want] : expected[group].items()) {
    SCOPED_TRACE("num_workers, shuffle: " + name);
    ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
    const std::string workers = std::to_string(want["workers"].get<int>());
    acc_dataloader* dl = loader(ds, {{"batch_size", "2"},
                                     {"num_workers", workers.c_str()},
                                     {"shuffle", want["shuffle"].get<bool>() ? "1" : "0"},
                                     {"generator_seed", generator_seed.c_str()}});
    acc_accelerator* acc = nullptr;
    if (!accelerator_options.empty()) {
      acc = acc_test::make_accelerator(accelerator_options);
      ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    }
    for (const auto& want_epoch : want["epochs"]) expect_batches(float_epoch(dl), want_epoch);
    EXPECT_EQ(acc_test::next_global_draws(), python_floats(want["after"])) << "the global stream";
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
  }
  acc_dataset_free(ds);
}
}  // namespace

TEST(DataLoader, AGeneratorOfItsOwnDrawsAsPyTorchsLoaderGenerator) {
  // tests/data/export_shuffles.py: DataLoader(generator=torch.Generator().manual_seed(s)), with and
  // without shuffling and workers: the base seeds (the workers' seeds) and the order come from that
  // generator; the global one moves only by what the dataset draws on the calling thread.
  expect_generator_cases("cases", {});
}

TEST(DataLoader, ADispatchedLoaderOnOneProcessDrawsItsBaseSeedsFromTheGlobalGenerator) {
  // tests/data/export_shuffles.py: prepared with dispatch_batches, Accelerate drops generator= from
  // the DataLoader it reads through, on one process too; its sampler keeps it. The base seeds (the
  // workers' seeds) come from the global generator, a shuffle's order from the loader's own.
  expect_generator_cases("dispatched", {{"cpu", "1"}, {"dispatch_batches", "1"}});
}

TEST(DataLoader, WorkersDrawAsPyTorchsWorkerProcessesWhateverTheirTiming) {
  // tests/data/export_shuffles.py: PyTorch's DataLoader over a dataset that draws two numbers per
  // sample, with 0, 2 and 3 worker processes, two epochs, then a draw from the global generator.
  const auto expected = shuffle_fixture("worker_draws.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  acc_dataset* ds = drawing_dataset(expected);
  for (const auto& [workers, want] : expected["cases"].items()) {
    for (int run = 0; run < 3; ++run) {  // the same numbers every run, whichever thread finishes first
      SCOPED_TRACE("num_workers " + workers + ", run " + std::to_string(run));
      ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
      acc_dataloader* dl =
          loader(ds, {{"batch_size", "2"}, {"num_workers", workers.c_str()}, {"prefetch_factor", "4"}});
      for (const auto& want_epoch : want["epochs"]) expect_batches(float_epoch(dl), want_epoch);
      EXPECT_EQ(acc_test::next_global_draws(), python_floats(want["after"])) << "the global stream moved";
      acc_dataloader_free(dl);
    }
  }
  acc_dataset_free(ds);
}

namespace {
// Reads `dl` for as many epochs as `want` has, a training step drawing torch.rand(1) after each batch
// (dropout's draw); checks the batches, the steps' draws and the global stream after.
void expect_epochs_with_step_draws(acc_dataloader* dl, const nlohmann::json& want) {
  std::vector<float> steps;
  for (const auto& want_epoch : want["epochs"]) {
    std::vector<std::vector<float>> batches;
    for (;;) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
      if (!batch) break;
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_get(batch, 0, &t));
      batches.push_back(acc_test::to_floats(t));
      acc_tensor_free(t);
      acc_tensor_list_free(batch);
      const int64_t one[] = {1};
      acc_tensor* draw = nullptr;
      ACC_ASSERT_OK(acc_tensor_rand(one, 1, &draw));
      steps.push_back(acc_test::to_floats(draw).at(0));
      acc_tensor_free(draw);
    }
    expect_batches(batches, want_epoch);
  }
  EXPECT_EQ(steps, python_floats(want["steps"])) << "the training step's draws";
  EXPECT_EQ(acc_test::next_global_draws(), python_floats(want["after"])) << "the global stream";
}

// A stream of the Drawing dataset's samples (drawn as the stream is read).
struct DrawingStream {
  int64_t n = 0, cursor = 0;
};

int drawing_stream_next(void* user_data, acc_tensor_list** out) {
  auto* s = static_cast<DrawingStream*>(user_data);
  *out = nullptr;
  return s->cursor < s->n ? drawing_sample(nullptr, s->cursor++, out) : 0;
}

int drawing_stream_start(void* user_data, int64_t) {
  static_cast<DrawingStream*>(user_data)->cursor = 0;
  return 0;
}
}  // namespace

TEST(DataLoader, APreparedLoaderFetchesOneAheadAsAcceleratesDataLoaderShard) {
  // tests/data/export_shuffles.py: Accelerate's prepared loader fetches batch i + 1 before it hands
  // out batch i, so a dataset that draws on the calling thread draws for batch i + 1 before the
  // training step on batch i draws; with and without shuffle.
  const auto expected = shuffle_fixture("prepared_look_ahead.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  acc_dataset* ds = drawing_dataset(expected);
  for (const auto& [shuffle, want] : expected["cases"].items()) {
    SCOPED_TRACE("shuffle " + shuffle);
    ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
    acc_dataloader* dl = loader(ds, {{"batch_size", "2"}, {"shuffle", shuffle.c_str()}});
    acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
    ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    expect_epochs_with_step_draws(dl, want);
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
  }
  acc_dataset_free(ds);
}

TEST(DataLoader, AStreamIsReadWhenAskedUnlessPrepared) {
  // tests/data/export_shuffles.py: PyTorch's DataLoader reads a stream only when a batch is asked
  // for, so a stream that draws does so for batch i + 1 after the training step on batch i;
  // Accelerate's prepared loader reads it one batch ahead, before that step.
  const auto expected = shuffle_fixture("stream_draws.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  for (const auto& [prepared, want] : expected["cases"].items()) {
    SCOPED_TRACE("prepared " + prepared);
    DrawingStream stream{expected["samples"].get<int64_t>()};
    acc_dataset* ds = nullptr;
    ACC_ASSERT_OK(acc_dataset_from_iterator(drawing_stream_next, drawing_stream_start, &stream, nullptr, -1, &ds));
    ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
    acc_dataloader* dl = loader(ds, {{"batch_size", "2"}});
    acc_accelerator* acc = prepared == "1" ? acc_test::make_accelerator({{"cpu", "1"}}) : nullptr;
    if (acc) ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    expect_epochs_with_step_draws(dl, want);
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
    acc_dataset_free(ds);
  }
}

TEST(DataLoader, AnEpochLeftEarlyTakesTheSamplersLastDrawWhenPyTorchsWould) {
  // tests/data/export_shuffles.py: with a generator of its own, the sampler's last, empty draw is
  // taken when PyTorch's iterator asks its batch sampler past the last full batch: with workers,
  // prefetch_factor * num_workers batches ahead; prepared (Accelerate's DataLoaderShard), one
  // ahead. Left after k batches, the next epoch's order shows whether it was taken.
  const auto expected = shuffle_fixture("early_ends.json");
  ASSERT_FALSE(expected.is_null()) << "run the export_pytorch_shuffles fixture";
  const std::string generator_seed = std::to_string(expected["generator_seed"].get<int64_t>());
  for (const auto& c : expected["cases"]) {
    const int64_t samples = c["samples"].get<int64_t>(), left_after = c["left_after"].get<int64_t>();
    const bool prepared = c["prepared"].get<bool>();
    const std::string workers = std::to_string(c["workers"].get<int>());
    SCOPED_TRACE(std::to_string(samples) + " samples, num_workers " + workers + (prepared ? ", prepared" : "") +
                 ", left after " + std::to_string(left_after));
    acc_dataset* ds = counting_dataset(samples);
    acc_dataloader* dl = loader(ds, {{"batch_size", "2"},
                                     {"shuffle", "1"},
                                     {"num_workers", workers.c_str()},
                                     {"prefetch_factor", "2"},
                                     {"generator_seed", generator_seed.c_str()}});
    acc_accelerator* acc = nullptr;
    if (prepared) {
      acc = acc_test::make_accelerator({{"cpu", "1"}});
      ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
    }
    for (int64_t b = 0; b < left_after; ++b) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
      ASSERT_NE(batch, nullptr);
      acc_tensor_list_free(batch);
    }
    ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));
    std::vector<int64_t> order;
    for (const auto& batch : epoch(dl)) order.insert(order.end(), batch.begin(), batch.end());
    EXPECT_EQ(order, c["next_epoch"].get<std::vector<int64_t>>());
    acc_dataloader_free(dl);
    if (acc) acc_accelerator_free(acc);
    acc_dataset_free(ds);
  }
}

TEST(DataLoader, OptionErrors) {
  acc_dataset* ds = counting_dataset(3);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_EXPECT_ERROR(acc_options_set_int(o, "batch_size", 0), ACC_ERR_INVALID_ARGUMENT, "batch_size");
  ACC_EXPECT_ERROR(acc_options_set(o, "shuffle", "maybe"), ACC_ERR_INVALID_ARGUMENT, "shuffle");
  ACC_ASSERT_OK(acc_options_set_string(o, "device", "gpu"));
  acc_dataloader* dl = nullptr;
  ACC_EXPECT_ERROR(acc_dataloader_create(ds, o, &dl), ACC_ERR_INVALID_ARGUMENT, "unknown device 'gpu'");
  acc_options_free(o);
  // PyTorch's RandomSampler refuses to shuffle no samples (found by a hunt: accepted, each epoch empty).
  acc_dataset* none = counting_dataset(0);
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "shuffle", "true"));
  ACC_EXPECT_ERROR(acc_dataloader_create(none, o, &dl), ACC_ERR_INVALID_ARGUMENT, "shuffle over an empty dataset");
  ACC_ASSERT_OK(acc_options_set(o, "shuffle", "false"));
  ACC_ASSERT_OK(acc_dataloader_create(none, o, &dl));  // (in order: an empty epoch, as PyTorch's)
  acc_dataloader_free(dl);
  acc_options_free(o);
  acc_dataset_free(none);
  dl = loader(ds, {{"batch_size", "2"}});
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
  ACC_EXPECT_ERROR(acc_dataloader_set_epoch(dl, 3), ACC_ERR_INVALID_ARGUMENT, "between epochs");
  acc_tensor_list_free(batch);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(Mmap, FileBackedTensorsReadWithoutChangingTheFile) {
  const std::string path = temp_path("features.bin");
  std::vector<float> values(3 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  {
    std::ofstream f(path, std::ios::binary);
    f.write("HEADER!!", 8);  // an 8-byte header before the data
    f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  }
  const int64_t dims[] = {-1, 4};
  acc_tensor* t = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_file_mmap(path.c_str(), 8, ACC_DTYPE_FLOAT32, dims, 2, &t));
  int64_t shape[2];
  size_t ndim = 0;
  ACC_ASSERT_OK(acc_tensor_shape(t, shape, 2, &ndim));
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(acc_test::to_floats(t), values);
  const int64_t too_many[] = {4, 4};
  acc_tensor* bad = nullptr;
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(path.c_str(), 8, ACC_DTYPE_FLOAT32, too_many, 2, &bad), ACC_ERR_IO,
                   "but the shape needs 64");
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap("/nonexistent.bin", 0, ACC_DTYPE_FLOAT32, dims, 2, &bad), ACC_ERR_IO,
                   "cannot open");
  // An offset past the end (a binding's -1 taken as 2^64 - 1, found by a hunt) is refused, not an
  // empty tensor; at the end, as many rows as remain: none.
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(path.c_str(), 57, ACC_DTYPE_FLOAT32, dims, 2, &bad), ACC_ERR_IO,
                   "offset 57 is past the end of");
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(path.c_str(), UINT64_MAX, ACC_DTYPE_UINT8, dims, 1, &bad), ACC_ERR_IO,
                   "is past the end of");
  ACC_ASSERT_OK(acc_tensor_from_file_mmap(path.c_str(), 56, ACC_DTYPE_FLOAT32, dims, 2, &bad));
  EXPECT_EQ(acc_test::to_floats(bad).size(), 0u);
  acc_tensor_free(bad);
  acc_tensor_free(t);
  std::remove(path.c_str());
}

// A mapped file cut short under a data set would kill the process (SIGBUS) when a batch reads past
// its new end: the data set sees it first and refuses the batch, naming the file.
TEST(Mmap, AFileCutShortUnderADataSetIsAnErrorNotACrash) {
  const std::string path = temp_path("cut_short.bin");
  constexpr int64_t kRows = 8, kRow = 1024;  // a page of floats per row
  {
    std::vector<float> values(static_cast<size_t>(kRows * kRow), 1.5f);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  }
  const int64_t dims[] = {-1, kRow};
  acc_tensor* x = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_file_mmap(path.c_str(), 0, ACC_DTYPE_FLOAT32, dims, 2, &x));
  acc_tensor* y = longs({0, 1, 2, 3, 4, 5, 6, 7}, {kRows});
  const acc_tensor* fields[] = {x, y};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 2, &ds));
  // No worker thread: a batch read while the file is cut (the check is made before each batch,
  // not during its read) would still end the process.
  acc_dataloader* dl = loader(ds, {{"batch_size", "2"}, {"num_workers", "0"}});
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
  acc_tensor_list_free(batch);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  batch = nullptr;
  EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_ERR_IO);
  EXPECT_EQ(batch, nullptr);
  EXPECT_NE(std::string(acc_last_error_message()).find("'" + path + "' was cut to 4096 bytes while mapped"),
            std::string::npos)
      << acc_last_error_message();
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_tensor_free(x);
  acc_tensor_free(y);
  std::remove(path.c_str());
}

TEST(Idx, RealFashionMnistFiles) {
  if (!have_fashion()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  acc_tensor* labels = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_idx_file((std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz").c_str(), &labels));
  int64_t n = 0;
  ACC_ASSERT_OK(acc_tensor_numel(labels, &n));
  EXPECT_EQ(n, 10000);
  std::vector<uint8_t> values(10000);
  ACC_ASSERT_OK(acc_tensor_to_host(labels, values.data(), values.size()));
  std::vector<int> counts(10);
  for (auto v : values) {
    ASSERT_LT(v, 10);
    ++counts[v];
  }
  for (int c : counts) EXPECT_EQ(c, 1000);  // the test split is balanced
  acc_tensor_free(labels);

  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_idx((std::string(kFashion) + "/t10k-images-idx3-ubyte.gz").c_str(),
                                     (std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz").c_str(), &ds));
  acc_tensor_list* sample = nullptr;
  ACC_ASSERT_OK(acc_dataset_get(ds, 0, &sample));
  acc_tensor* image = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_get(sample, 0, &image));
  int64_t shape[3];
  size_t ndim = 0;
  ACC_ASSERT_OK(acc_tensor_shape(image, shape, 3, &ndim));
  EXPECT_EQ(ndim, 3u);
  EXPECT_EQ(shape[1], 28);
  auto pixels = acc_test::to_floats(image);
  EXPECT_GE(*std::min_element(pixels.begin(), pixels.end()), 0.0f);
  EXPECT_LE(*std::max_element(pixels.begin(), pixels.end()), 1.0f);
  acc_tensor_free(image);
  acc_tensor_list_free(sample);
  acc_dataset_free(ds);
}

TEST(Idx, TruncatedAndCorruptFilesAreRejectedWithTheReason) {
  const std::string path = temp_path("labels.idx.gz");
  acc_tensor* t = nullptr;
  // A valid 1-d ubyte file of 4 labels.
  std::vector<unsigned char> good = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  write_gz(path, good);
  ACC_ASSERT_OK(acc_tensor_from_idx_file(path.c_str(), &t));
  acc_tensor_free(t);
  // Truncated data.
  write_gz(path, std::vector<unsigned char>(good.begin(), good.end() - 2));
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(path.c_str(), &t), ACC_ERR_IO, "truncated: the header declares 4 bytes");
  // Bad magic.
  std::vector<unsigned char> bad_magic = good;
  bad_magic[0] = 7;
  write_gz(path, bad_magic);
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(path.c_str(), &t), ACC_ERR_IO, "bad magic");
  // Unknown element type.
  std::vector<unsigned char> bad_type = good;
  bad_type[2] = 0x42;
  write_gz(path, bad_type);
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(path.c_str(), &t), ACC_ERR_IO, "unknown element type");
  // Trailing garbage.
  std::vector<unsigned char> longer = good;
  longer.push_back(9);
  write_gz(path, longer);
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(path.c_str(), &t), ACC_ERR_IO, "past the 4 bytes");
  // A damaged gzip stream.
  write_gz(path, std::vector<unsigned char>(4096, 0));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12);
    f.write("\xff\xff\xff\xff", 4);
  }
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(path.c_str(), &t), ACC_ERR_IO, path);
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file("/nonexistent/labels.gz", &t), ACC_ERR_IO, "cannot open");
  // Images and labels that disagree.
  acc_dataset* ds = nullptr;
  write_gz(path, good);
  const std::string images = temp_path("images.idx.gz");
  write_gz(images, {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6});
  ACC_EXPECT_ERROR(acc_dataset_from_idx(images.c_str(), path.c_str(), &ds), ACC_ERR_IO, "has 2 images but");
  std::remove(path.c_str());
  std::remove(images.c_str());
}

TEST(Idx, AHeaderClaimingMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
  acc_tensor* t = nullptr;
  // 0xFFFFFFFF x 0xFF bytes claimed (1 TB) with 2 bytes behind the header.
  const std::vector<unsigned char> huge = {0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 1, 2};
  const std::string plain = temp_path("huge.idx");
  {
    std::ofstream f(plain, std::ios::binary);
    f.write(reinterpret_cast<const char*>(huge.data()), static_cast<std::streamsize>(huge.size()));
  }
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(plain.c_str(), &t), ACC_ERR_IO, "the file has 2");
  // 0xFFFFFFFF bytes claimed (4 GB), 2 there: a gzip stream can only tell by being read.
  const std::vector<unsigned char> big = {0, 0, 8, 1, 0xff, 0xff, 0xff, 0xff, 1, 2};
  const std::string gz = temp_path("big.idx.gz");
  write_gz(gz, big);
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(gz.c_str(), &t), ACC_ERR_IO, "the file has 2");
  EXPECT_EQ(t, nullptr);
  std::remove(plain.c_str());
  std::remove(gz.c_str());
}

TEST(Idx, APathThatIsNotARegularFileIsRefusedInsteadOfBlocking) {
  const std::string fifo = temp_path("labels.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  acc_tensor* t = nullptr;
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file(fifo.c_str(), &t), ACC_ERR_IO, "not a regular file");
  const int64_t dims[] = {4};
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(fifo.c_str(), 0, ACC_DTYPE_UINT8, dims, 1, &t), ACC_ERR_IO,
                   "not a regular file");
  ACC_EXPECT_ERROR(acc_tensor_from_idx_file("/tmp", &t), ACC_ERR_IO, "not a regular file");
  std::remove(fifo.c_str());
}

TEST(Idx, SignedByteAndShortFilesLoadAsInt8AndInt16) {
  const std::string path = temp_path("signed.idx.gz");
  acc_tensor* t = nullptr;
  write_gz(path, {0, 0, 0x09, 1, 0, 0, 0, 3, 0x80, 0x00, 0x7f});
  ACC_ASSERT_OK(acc_tensor_from_idx_file(path.c_str(), &t));
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_INT8);
  EXPECT_EQ(acc_dtype_size(ACC_DTYPE_INT8), 1u);
  int8_t bytes[3] = {};
  ACC_ASSERT_OK(acc_tensor_to_host(t, bytes, sizeof bytes));
  EXPECT_EQ(bytes[0], -128);
  EXPECT_EQ(bytes[2], 127);
  acc_tensor_free(t);
  // int16, big-endian in the file.
  write_gz(path, {0, 0, 0x0B, 1, 0, 0, 0, 2, 0xff, 0xfe, 0x01, 0x00});
  ACC_ASSERT_OK(acc_tensor_from_idx_file(path.c_str(), &t));
  ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_INT16);
  int16_t shorts[2] = {};
  ACC_ASSERT_OK(acc_tensor_to_host(t, shorts, sizeof shorts));
  EXPECT_EQ(shorts[0], -2);
  EXPECT_EQ(shorts[1], 256);
  // They convert like any other dtype.
  acc_tensor* wide = nullptr;
  ACC_ASSERT_OK(acc_tensor_to(t, nullptr, ACC_DTYPE_INT64, &wide));
  EXPECT_EQ(acc_test::to_longs(wide), (std::vector<int64_t>{-2, 256}));
  acc_tensor_free(wide);
  acc_tensor_free(t);
  std::remove(path.c_str());
}

namespace {

// Sample i of a callback dataset: features [i, i], label i; index 13 fails on purpose.
int sample_fn(void* user_data, int64_t index, acc_tensor_list** out) {
  ++*static_cast<std::atomic<int>*>(user_data);
  if (index == 13) {
    acc_callback_set_error("sample 13 is corrupt");
    return 42;
  }
  acc_tensor_list* list = nullptr;
  if (acc_tensor_list_create(&list) != ACC_OK) return 1;
  const float xs[2] = {static_cast<float>(index), static_cast<float>(index)};
  const int64_t dims[1] = {2};
  acc_tensor *x = nullptr, *y = nullptr;
  if (acc_tensor_from_host(xs, sizeof xs, dims, 1, ACC_DTYPE_FLOAT32, &x) != ACC_OK) return 1;
  if (acc_tensor_from_host(&index, sizeof index, nullptr, 0, ACC_DTYPE_INT64, &y) != ACC_OK) return 1;
  if (acc_tensor_list_append(list, "x", x) != ACC_OK || acc_tensor_list_append(list, "y", y) != ACC_OK) return 1;
  acc_tensor_free(x);
  acc_tensor_free(y);
  *out = list;
  return 0;
}

}  // namespace

TEST(CallbackDataset, SamplesFromTheHostAreStackedIntoBatches) {
  static std::atomic<int> calls{0};
  static bool freed = false;
  calls = 0;
  freed = false;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_callback(10, sample_fn, &calls, [](void*) { freed = true; }, &ds));
  acc_dataloader* dl = loader(ds, {{"batch_size", "4"}, {"num_workers", "2"}});
  auto batches = epoch(dl);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1], (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(calls, 10);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  EXPECT_TRUE(freed);  // the user data went with the last user of the dataset
}

TEST(CallbackDataset, ACallbackErrorIsReportedNotACrash) {
  static std::atomic<int> calls{0};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_callback(16, sample_fn, &calls, nullptr, &ds));
  for (const char* workers : {"0", "2"}) {
    acc_dataloader* dl = loader(ds, {{"batch_size", "4"}, {"num_workers", workers}});
    acc_tensor_list* batch = nullptr;
    acc_status status = ACC_OK;
    int good = 0;
    while ((status = acc_dataloader_next(dl, &batch)) == ACC_OK && batch) {
      ++good;
      acc_tensor_list_free(batch);
    }
    EXPECT_EQ(good, 3);  // batches 0-2 are fine; batch 3 holds sample 13
    EXPECT_EQ(status, ACC_ERR_IO);
    EXPECT_NE(std::string(acc_last_error_message()).find("index 13 failed (code 42): sample 13 is corrupt"),
              std::string::npos)
        << acc_last_error_message();
    acc_dataloader_free(dl);
  }
  acc_dataset* bad = nullptr;
  ACC_EXPECT_ERROR(acc_dataset_from_callback(-1, sample_fn, nullptr, nullptr, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "must not be negative");
  ACC_EXPECT_ERROR(acc_dataset_from_callback(3, nullptr, nullptr, nullptr, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "sample is NULL");
  acc_dataset_free(ds);
}

TEST(CallbackDataset, CollateCallbackMakesTheBatch) {
  acc_dataset* ds = counting_dataset(6);
  acc_dataloader* dl = loader(ds, {{"batch_size", "3"}});
  // Collate into one field: the sum of the samples' labels.
  auto collate = [](void*, const acc_tensor_list* const* samples, size_t n, acc_tensor_list** out) -> int {
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      acc_tensor* y = nullptr;
      if (acc_tensor_list_get(samples[i], 1, &y) != ACC_OK) return 1;
      int64_t v = 0;
      if (acc_tensor_to_host(y, &v, sizeof v) != ACC_OK) return 1;
      total += v;
      acc_tensor_free(y);
    }
    acc_tensor* t = nullptr;
    const int64_t dims[1] = {1};
    if (acc_tensor_from_host(&total, sizeof total, dims, 1, ACC_DTYPE_INT64, &t) != ACC_OK) return 1;
    const bool ok = acc_tensor_list_create(out) == ACC_OK &&
                    acc_tensor_list_append(*out, "unused", t) == ACC_OK &&  // field 0
                    acc_tensor_list_append(*out, "sum", t) == ACC_OK;       // field 1, what epoch() reads
    acc_tensor_free(t);
    return ok ? 0 : 1;
  };
  ACC_ASSERT_OK(acc_dataloader_set_collate(dl, collate, nullptr, nullptr));
  auto batches = epoch(dl);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0 + 1 + 2}));
  EXPECT_EQ(batches[1], (std::vector<int64_t>{3 + 4 + 5}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, SkipFirstBatchesResumesMidEpoch) {
  acc_dataset* ds = counting_dataset(10);
  acc_dataloader* dl = loader(ds, {{"batch_size", "2"}, {"shuffle", "1"}, {"seed", "7"}});
  auto whole = epoch(dl);  // epoch 0
  ACC_ASSERT_OK(acc_dataloader_set_epoch(dl, 0));
  ACC_ASSERT_OK(acc_dataloader_skip_first_batches(dl, 3));
  auto rest = epoch(dl);  // the rest of epoch 0, not a replay
  EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(whole.begin() + 3, whole.end()));
  EXPECT_EQ(epoch(dl).size(), 5u);  // the next epoch is whole again
  ACC_EXPECT_ERROR(acc_dataloader_skip_first_batches(dl, -1), ACC_ERR_INVALID_ARGUMENT, "negative");
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, EmptyDatasetsYieldNothing) {
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_callback(0, sample_fn, nullptr, nullptr, &ds));
  acc_dataloader* dl = loader(ds, {{"batch_size", "4"}});
  int64_t length = -1;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, 0);
  EXPECT_TRUE(epoch(dl).empty());
  EXPECT_TRUE(epoch(dl).empty());
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

namespace {

struct Stream {
  int64_t n = 0, cursor = 0, fail_at = -1;
  std::vector<int64_t> epochs_started;
};

int stream_next(void* user_data, acc_tensor_list** out) {
  auto* s = static_cast<Stream*>(user_data);
  if (s->cursor == s->fail_at) {
    acc_callback_set_error("the socket closed");
    return 5;
  }
  if (s->cursor >= s->n) {
    *out = nullptr;  // end of the stream
    return 0;
  }
  const int64_t i = s->cursor++;
  const float x = static_cast<float>(i);
  acc_tensor *xt = nullptr, *yt = nullptr;
  const int64_t one[1] = {1};
  if (acc_tensor_from_host(&x, sizeof x, one, 1, ACC_DTYPE_FLOAT32, &xt) != ACC_OK ||
      acc_tensor_from_host(&i, sizeof i, nullptr, 0, ACC_DTYPE_INT64, &yt) != ACC_OK || acc_tensor_list_create(out) != ACC_OK)
    return 1;
  const bool ok = acc_tensor_list_append(*out, "x", xt) == ACC_OK && acc_tensor_list_append(*out, "y", yt) == ACC_OK;
  acc_tensor_free(xt);
  acc_tensor_free(yt);
  return ok ? 0 : 1;
}

int stream_start(void* user_data, int64_t epoch) {
  auto* s = static_cast<Stream*>(user_data);
  s->cursor = 0;
  s->epochs_started.push_back(epoch);
  return 0;
}

}  // namespace

TEST(IterableDataset, StreamsAreBatchedInOrderEachEpoch) {
  Stream stream;
  stream.n = 10;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_iterator(stream_next, stream_start, &stream, nullptr, 10, &ds));
  int64_t size = 0;
  ACC_ASSERT_OK(acc_dataset_size(ds, &size));
  EXPECT_EQ(size, 10);
  acc_dataloader* dl = loader(ds, {{"batch_size", "4"}});
  int64_t length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, 3);
  std::vector<int> ends;
  std::vector<std::vector<int64_t>> batches;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    if (!batch) break;
    int end = -1;
    ACC_ASSERT_OK(acc_dataloader_end_of_epoch(dl, &end));
    ends.push_back(end);
    acc_tensor* y = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(batch, 1, &y));
    batches.push_back(acc_test::to_longs(y));
    acc_tensor_free(y);
    acc_tensor_list_free(batch);
  }
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(ends, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(epoch(dl).size(), 3u);
  EXPECT_EQ(stream.epochs_started, (std::vector<int64_t>{0, 1}));
  acc_dataloader_free(dl);
  dl = loader(ds, {{"batch_size", "4"}, {"drop_last", "1"}});
  EXPECT_EQ(epoch(dl).size(), 2u);
  acc_dataloader_free(dl);

  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "shuffle", 1));
  ACC_EXPECT_ERROR(acc_dataloader_create(ds, o, &dl), ACC_ERR_INVALID_ARGUMENT, "cannot be shuffled");
  acc_options_free(o);
  acc_tensor_list* sample = nullptr;
  ACC_EXPECT_ERROR(acc_dataset_get(ds, 0, &sample), ACC_ERR_INVALID_ARGUMENT, "iterable dataset");
  acc_dataset_free(ds);
}

TEST(IterableDataset, AStreamErrorIsReported) {
  Stream stream;
  stream.n = 10;
  stream.fail_at = 6;
  acc_dataset* ds = nullptr;
  for (const int64_t hint : {int64_t{-2}, INT64_MIN})  // a count, or -1 for unknown
    ACC_EXPECT_ERROR(acc_dataset_from_iterator(stream_next, stream_start, &stream, nullptr, hint, &ds),
                     ACC_ERR_INVALID_ARGUMENT, "size_hint is a number of samples, or -1 when unknown");
  ACC_ASSERT_OK(acc_dataset_from_iterator(stream_next, stream_start, &stream, nullptr, -1, &ds));
  acc_dataloader* dl = loader(ds, {{"batch_size", "4"}});
  int64_t length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, -1);
  acc_tensor_list* batch = nullptr;
  // The first batch comes (a loader not prepared reads only when asked); the second fails at sample 6.
  ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
  ASSERT_NE(batch, nullptr);
  acc_tensor_list_free(batch);
  batch = nullptr;
  ACC_EXPECT_ERROR(acc_dataloader_next(dl, &batch), ACC_ERR_IO, "next callback failed (code 5): the socket closed");
  EXPECT_EQ(batch, nullptr);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, AStreamNotPreparedReadsAheadOnlyToSayWhetherItsEpochEnded) {
  // acc_dataloader_end_of_epoch on a stream read only when asked reads the next batch to answer; the
  // batches and their order are the same either way.
  Stream stream;
  stream.n = 5;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_iterator(stream_next, stream_start, &stream, nullptr, -1, &ds));
  acc_dataloader* dl = loader(ds, {{"batch_size", "2"}});
  std::vector<int64_t> cursors, labels;
  std::vector<int> ends;
  for (int asked = 0; asked < 2; ++asked) {
    for (;;) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
      if (!batch) break;
      cursors.push_back(stream.cursor);
      if (asked) {
        int end = -1;
        ACC_ASSERT_OK(acc_dataloader_end_of_epoch(dl, &end));
        ends.push_back(end);
        cursors.push_back(stream.cursor);
      }
      acc_tensor* y = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_get(batch, 1, &y));
      for (int64_t v : acc_test::to_longs(y)) labels.push_back(v);
      acc_tensor_free(y);
      acc_tensor_list_free(batch);
    }
  }
  // Not asked: the stream stands at the batch handed out. Asked: one batch further.
  EXPECT_EQ(cursors, (std::vector<int64_t>{2, 4, 5, 2, 4, 4, 5, 5, 5}));
  EXPECT_EQ(ends, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(DataLoader, BatchSamplerBatchesOfVaryingSizes) {
  acc_dataset* ds = counting_dataset(10);
  const int64_t indices[] = {9, 0, 1, 5, 2, 3, 4};
  const size_t sizes[] = {1, 3, 3};
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create_from_batches(ds, indices, sizes, 3, nullptr, &dl));
  int64_t length = 0;
  ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
  EXPECT_EQ(length, 3);
  const std::vector<std::vector<int64_t>> expected = {{9}, {0, 1, 5}, {2, 3, 4}};
  EXPECT_EQ(epoch(dl), expected);
  EXPECT_EQ(epoch(dl), expected);  // every epoch
  acc_dataloader_free(dl);

  acc_dataloader* bad = nullptr;
  const int64_t outside[] = {3, 10};
  const size_t two[] = {2};
  ACC_EXPECT_ERROR(acc_dataloader_create_from_batches(ds, outside, two, 1, nullptr, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "index 10, outside the dataset of 10");
  const size_t with_empty[] = {2, 0};
  ACC_EXPECT_ERROR(acc_dataloader_create_from_batches(ds, indices, with_empty, 2, nullptr, &bad),
                   ACC_ERR_INVALID_ARGUMENT, "batch 1 of the batch sampler is empty");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "shuffle", 1));
  ACC_EXPECT_ERROR(acc_dataloader_create_from_batches(ds, indices, sizes, 3, o, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "'shuffle' does not apply");
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_dataloader_create_from_batches(ds, indices, nullptr, 3, nullptr, &bad),
                   ACC_ERR_INVALID_ARGUMENT, "batch_sizes");
  EXPECT_EQ(bad, nullptr);
  acc_dataset_free(ds);
}

TEST(DataLoader, SeedableSamplerUsesTorchsSeedPlusTheEpoch) {
  acc_dataset* ds = counting_dataset(12);
  // The reference: a loader with seed 21 of its own permutes epoch e with 21 + e.
  acc_dataloader* seeded = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}, {"seed", "21"}});
  const auto epoch0 = epoch(seeded), epoch1 = epoch(seeded);
  acc_dataloader_free(seeded);

  ACC_ASSERT_OK(acc_set_seed(21));
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"use_seedable_sampler", "1"}});
  acc_dataloader* dl = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}});
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
  EXPECT_EQ(epoch(dl), epoch0);
  EXPECT_EQ(epoch(dl), epoch1);
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
}

// Found by a hunt: a loader that had run epochs kept its epoch count when prepared, so a seedable
// shuffle began at seed + k; Accelerate's DataLoaderShard counts from 0 (its first epoch is seed + 0).
TEST(DataLoader, APreparedLoaderCountsItsEpochsFromZero) {
  acc_dataset* ds = counting_dataset(12);
  acc_dataloader* seeded = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}, {"seed", "21"}});
  const auto epoch0 = epoch(seeded);
  acc_dataloader_free(seeded);

  ACC_ASSERT_OK(acc_set_seed(21));
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"use_seedable_sampler", "1"}});
  acc_dataloader* dl = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}});
  (void)epoch(dl);  // an epoch before it is prepared
  (void)epoch(dl);
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, nullptr, &dl, nullptr));
  int64_t count = -1;
  ACC_ASSERT_OK(acc_dataloader_epoch(dl, &count));
  EXPECT_EQ(count, 0);
  EXPECT_EQ(epoch(dl), epoch0);
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  acc_dataset_free(ds);
}

// Accelerate reads data_seed only for its SeedableRandomSampler: with use_seedable_sampler epoch e
// permutes with data_seed + e; alone it changes nothing (the unseeded shuffle after set_seed).
TEST(DataLoader, DataSeedCountsOnlyWithTheSeedableSampler) {
  acc_dataset* ds = counting_dataset(12);
  acc_dataloader* seeded = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}, {"seed", "5"}});
  const auto seed5_epoch0 = epoch(seeded), seed5_epoch1 = epoch(seeded);
  acc_dataloader_free(seeded);
  auto prepared_epochs = [&](std::vector<std::pair<std::string, std::string>> options) {
    EXPECT_EQ(acc_set_seed(21), ACC_OK);
    options.emplace_back("cpu", "1");
    acc_accelerator* acc = acc_test::make_accelerator(options);
    acc_dataloader* dl = loader(ds, {{"batch_size", "12"}, {"shuffle", "1"}});
    EXPECT_EQ(acc_prepare(acc, nullptr, nullptr, &dl, nullptr), ACC_OK) << acc_last_error_message();
    std::vector<std::vector<std::vector<int64_t>>> epochs{epoch(dl), epoch(dl)};
    acc_dataloader_free(dl);
    acc_accelerator_free(acc);
    return epochs;
  };
  const auto seedable = prepared_epochs({{"use_seedable_sampler", "1"}, {"data_seed", "5"}});
  EXPECT_EQ(seedable[0], seed5_epoch0);
  EXPECT_EQ(seedable[1], seed5_epoch1);
  EXPECT_EQ(prepared_epochs({{"data_seed", "5"}}), prepared_epochs({}));
  EXPECT_NE(prepared_epochs({}), seedable);
  acc_dataset_free(ds);
}

// After acc_load_state, naming the loaded epoch with acc_dataloader_set_epoch resumes it where the
// checkpoint was; naming another starts that one whole, in its own order (seed + epoch: Accelerate's
// set_epoch, whose load_state leaves loaders alone), and the epochs after it follow.
TEST(DataLoader, SetEpochAfterALoadResumesTheLoadedEpochOrStartsTheNamedOneWhole) {
  acc_dataset* ds = counting_dataset(12);
  auto prepared = [&](acc_accelerator* acc) {
    acc_dataloader* dl = loader(ds, {{"batch_size", "2"}, {"shuffle", "1"}, {"seed", "100"}});
    EXPECT_EQ(acc_prepare(acc, nullptr, nullptr, &dl, nullptr), ACC_OK) << acc_last_error_message();
    return dl;
  };
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  acc_dataloader* dl = prepared(acc);
  ACC_ASSERT_OK(acc_dataloader_set_epoch(dl, 1));
  std::vector<std::vector<std::vector<int64_t>>> orders = {{}, epoch(dl), epoch(dl), epoch(dl)};  // epochs 1 to 3
  ACC_ASSERT_OK(acc_dataloader_set_epoch(dl, 1));
  for (int i = 0; i < 2; ++i) {  // two batches into epoch 1
    acc_tensor_list* batch = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &batch));
    acc_tensor_list_free(batch);
  }
  const std::string dir = acc_test::temp_path("set_epoch_after_load");
  std::filesystem::remove_all(dir);
  ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
  acc_dataloader_free(dl);
  acc_accelerator_free(acc);
  for (int64_t named : {1, 2}) {
    SCOPED_TRACE(named);
    acc_accelerator* resumed = acc_test::make_accelerator({{"cpu", "1"}});
    acc_dataloader* again = prepared(resumed);
    ACC_ASSERT_OK(acc_load_state(resumed, dir.c_str(), nullptr));
    ACC_ASSERT_OK(acc_dataloader_set_epoch(again, named));
    const auto expected =
        named == 1 ? std::vector<std::vector<int64_t>>(orders[1].begin() + 2, orders[1].end()) : orders[2];
    EXPECT_EQ(epoch(again), expected);
    int64_t next = -1;
    ACC_ASSERT_OK(acc_dataloader_epoch(again, &next));
    EXPECT_EQ(next, named + 1);
    EXPECT_EQ(epoch(again), orders[named + 1]);
    acc_dataloader_free(again);
    acc_accelerator_free(resumed);
  }
  std::filesystem::remove_all(dir);
  acc_dataset_free(ds);
}

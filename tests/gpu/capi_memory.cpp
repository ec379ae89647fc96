// Data to the GPU and GPU memory through the C API: pinned-memory non-blocking batch copies, and
// acc_find_executable_batch_size on a real CUDA out-of-memory.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_support.h"

using acc_gpu::device_of;
using acc_gpu::dtype_of;
using acc_test::make_accelerator;

namespace {

constexpr int64_t kSamples = 2560, kWidth = 8192, kBatch = 64;

// Sample i: features i * 4096 + (j % 4096) (exact in float32: below 2^24), label i.
float feature(int64_t i, int64_t j) { return static_cast<float>(i * 4096 + j % 4096); }

acc_dataset* numbered_dataset() {
  std::vector<float> x(static_cast<size_t>(kSamples * kWidth));
  std::vector<int64_t> y(static_cast<size_t>(kSamples));
  for (int64_t i = 0; i < kSamples; ++i) {
    y[i] = i;
    for (int64_t j = 0; j < kWidth; ++j) x[i * kWidth + j] = feature(i, j);
  }
  acc_tensor* xt = acc_test::floats(x, {kSamples, kWidth});
  acc_tensor* yt = acc_test::longs(y, {kSamples});
  const acc_tensor* fields[] = {xt, yt};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 2, &ds), ACC_OK) << acc_last_error_message();
  acc_tensor_free(xt);
  acc_tensor_free(yt);
  return ds;
}

// A loader of kBatch over ds, two workers fetching 4 batches ahead each, prepared by acc. The raw
// loader stays alive in *raw (the accelerator knows prepared loaders by their original's address).
acc_dataloader* prepared_loader(acc_accelerator* acc, acc_dataset* ds, bool shuffle, acc_dataloader** raw) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "batch_size", kBatch), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "shuffle", shuffle), ACC_OK);
  if (shuffle) EXPECT_EQ(acc_options_set_int(o, "seed", 5), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "num_workers", 2), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "prefetch_factor", 4), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  acc_dataloader* prepared = nullptr;
  EXPECT_EQ(acc_prepare_dataloader(acc, dl, ACC_PLACEMENT_DEFAULT, &prepared), ACC_OK) << acc_last_error_message();
  *raw = dl;
  return prepared;
}

// Checks one batch: both fields on `device`, rows matching their labels, features exact. Returns
// the labels.
std::vector<int64_t> check_batch(acc_tensor_list* batch, const std::string& device, int64_t index) {
  acc_tensor *x = nullptr, *y = nullptr;
  EXPECT_EQ(acc_tensor_list_get(batch, 0, &x), ACC_OK);
  EXPECT_EQ(acc_tensor_list_get(batch, 1, &y), ACC_OK);
  EXPECT_EQ(device_of(x), device) << "batch " << index << " features";
  EXPECT_EQ(device_of(y), device) << "batch " << index << " labels";
  EXPECT_EQ(dtype_of(x), ACC_DTYPE_FLOAT32);
  EXPECT_EQ(dtype_of(y), ACC_DTYPE_INT64);
  const auto ids = acc_test::to_longs(y);
  const auto values = acc_test::to_floats(x);
  EXPECT_EQ(values.size(), ids.size() * kWidth) << "batch " << index;
  int64_t wrong = 0, first_wrong = -1;
  for (size_t r = 0; r < ids.size() && (r + 1) * kWidth <= values.size(); ++r)
    for (int64_t j = 0; j < kWidth; ++j)
      if (values[r * kWidth + j] != feature(ids[r], j)) {
        if (wrong++ == 0) first_wrong = static_cast<int64_t>(r * kWidth + j);
      }
  EXPECT_EQ(wrong, 0) << "batch " << index << ": " << wrong << " feature values differ from the source, first at "
                      << first_wrong << " (" << values[first_wrong] << ")";
  acc_tensor_free(x);
  acc_tensor_free(y);
  return ids;
}

}  // namespace

TEST(GpuData, PinnedNonBlockingCopiesDeliverEveryBatchIntactAndInOrder) {
  ACC_REQUIRE_CUDA();
  acc_options* ao = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &ao));
  char* non_blocking = nullptr;
  ACC_ASSERT_OK(acc_options_get(ao, "non_blocking", &non_blocking));
  EXPECT_STREQ(non_blocking, "true") << "this test is about the default: asynchronous copies from pinned memory";
  acc_string_free(non_blocking);
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(ao, &acc));
  acc_options_free(ao);
  const std::string device = device_of(acc);
  ASSERT_EQ(device.rfind("cuda", 0), 0u) << device;
  acc_dataset* ds = numbered_dataset();

  // In order, every batch held before any is read: each must still hold its own data once all the
  // asynchronous copies (and the reuse of pinned buffers behind them) are done.
  acc_dataloader *ordered_raw = nullptr, *shuffled_raw = nullptr;
  acc_dataloader* ordered = prepared_loader(acc, ds, false, &ordered_raw);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<acc_tensor_list*> held;
    for (;;) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(ordered, &batch));
      if (!batch) break;
      held.push_back(batch);
    }
    ASSERT_EQ(held.size(), static_cast<size_t>(kSamples / kBatch)) << "epoch " << epoch;
    for (size_t b = 0; b < held.size(); ++b) {
      const auto ids = check_batch(held[b], device, static_cast<int64_t>(b));
      std::vector<int64_t> expected(kBatch);
      for (int64_t r = 0; r < kBatch; ++r) expected[r] = static_cast<int64_t>(b) * kBatch + r;
      EXPECT_EQ(ids, expected) << "epoch " << epoch << " batch " << b << " is not the " << b << "th slice";
      acc_tensor_list_free(held[b]);
    }
  }

  // Shuffled, each batch read as it comes: every sample exactly once per epoch, its features with it.
  acc_dataloader* shuffled = prepared_loader(acc, ds, true, &shuffled_raw);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    int64_t index = 0;
    for (;;) {
      acc_tensor_list* batch = nullptr;
      ACC_ASSERT_OK(acc_dataloader_next(shuffled, &batch));
      if (!batch) break;
      const auto ids = check_batch(batch, device, index++);
      seen.insert(seen.end(), ids.begin(), ids.end());
      acc_tensor_list_free(batch);
    }
    std::vector<int64_t> in_order(seen);
    std::sort(in_order.begin(), in_order.end());
    std::vector<int64_t> all(kSamples);
    for (int64_t i = 0; i < kSamples; ++i) all[i] = i;
    EXPECT_EQ(in_order, all) << "epoch " << epoch << ": not every sample exactly once";
    EXPECT_NE(seen, all) << "epoch " << epoch << " was not shuffled";
  }

  for (acc_dataloader* dl : {ordered, shuffled, ordered_raw, shuffled_raw}) acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_accelerator_free(acc);
}

namespace {

// A run whose memory grows with the batch size: one float32 tensor of batch_size GiB on the GPU.
struct Search {
  std::string device;
  std::vector<int64_t> tried;
  std::vector<int> statuses;
  std::string first_failure;
};

int allocate_gib_per_sample(void* user_data, int64_t batch_size) {
  auto* s = static_cast<Search*>(user_data);
  s->tried.push_back(batch_size);
  const int64_t dims[2] = {batch_size, int64_t{1} << 28};  // 2^28 floats: 1 GiB a sample
  acc_tensor *t = nullptr, *sum = nullptr;
  acc_status status = acc_tensor_zeros(dims, 2, ACC_DTYPE_FLOAT32, s->device.c_str(), &t);
  if (status == ACC_OK) status = acc_tensor_sum(t, &sum);  // touch it: the memory is really there
  if (status != ACC_OK && s->first_failure.empty()) s->first_failure = acc_last_error_message();
  acc_tensor_free(sum);
  acc_tensor_free(t);
  s->statuses.push_back(status);
  return status;
}

}  // namespace

TEST(GpuBatchSize, ARealCudaOutOfMemoryShrinksTheBatchToTheFirstSizeThatFits) {
  ACC_REQUIRE_CUDA();
  acc_accelerator* acc = make_accelerator({});
  ASSERT_NE(acc, nullptr);
  Search search;
  search.device = device_of(acc);
  ASSERT_EQ(search.device.rfind("cuda", 0), 0u) << search.device;
  // 200 GiB at the start is more than any single GPU holds; 0.9^k shrinks it below 80 GiB in 9 tries.
  int64_t found = -1;
  ACC_ASSERT_OK(acc_find_executable_batch_size(200, allocate_gib_per_sample, &search, &found));
  std::string tried;
  for (size_t i = 0; i < search.tried.size(); ++i)
    tried += (i ? ", " : "") + std::to_string(search.tried[i]) + (search.statuses[i] == ACC_OK ? " fits" : " OOM");
  std::printf("batch sizes tried (GiB): %s; found %lld\nfirst failure: %s\n", tried.c_str(),
              static_cast<long long>(found), search.first_failure.c_str());

  ASSERT_GE(search.tried.size(), 2u) << "200 GiB cannot have fitted";
  EXPECT_EQ(found, search.tried.back()) << "the size found is the one of the run that finished";
  EXPECT_EQ(search.statuses.back(), ACC_OK);
  for (size_t i = 0; i + 1 < search.statuses.size(); ++i)
    EXPECT_EQ(search.statuses[i], ACC_ERR_OUT_OF_MEMORY)
        << "batch size " << search.tried[i] << " failed with " << acc_status_name(acc_status(search.statuses[i]))
        << ", not out of memory";
  // Accelerate's sequence: 90% of the last size, rounded down, from 200 on.
  int64_t expected = 200;
  for (size_t i = 0; i < search.tried.size(); ++i) {
    EXPECT_EQ(search.tried[i], expected) << "try " << i;
    expected = static_cast<int64_t>(static_cast<double>(expected) * 0.9);
  }
  EXPECT_NE(search.first_failure.find("out of memory"), std::string::npos)
      << "the library's message of a CUDA out-of-memory: " << search.first_failure;
  // Memory was given back between tries and after: the size found fits again at once.
  Search again{search.device, {}, {}, {}};
  EXPECT_EQ(allocate_gib_per_sample(&again, found), ACC_OK) << again.first_failure;
  acc_accelerator_free(acc);
}

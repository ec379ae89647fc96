// acc_dataloader_end_epoch and acc_dataloader_in_epoch: a loop left early ends its epoch, as a
// dropped Python iterator does, so the next loop starts the following epoch and load_state accepts
// the loader again.
#include <cstdio>
#include <vector>

#include "support.h"

namespace {

acc_dataset* numbered(int64_t n) {
  std::vector<float> xs(static_cast<size_t>(n));
  std::vector<int64_t> ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i), ys[i] = i;
  acc_tensor* x = acc_test::floats(xs, {n, 1});
  acc_tensor* y = acc_test::longs(ys, {n});
  const acc_tensor* fields[] = {x, y};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 2, &ds), ACC_OK) << acc_last_error_message();
  acc_tensor_free(x);
  acc_tensor_free(y);
  return ds;
}

acc_dataloader* shuffled(acc_dataset* ds) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "batch_size", "2"), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "shuffle", "1"), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "seed", "11"), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return dl;
}

// The labels of the next batch, or empty at the end of the epoch.
std::vector<int64_t> next_labels(acc_dataloader* dl) {
  acc_tensor_list* batch = nullptr;
  EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
  if (!batch) return {};
  acc_tensor* y = nullptr;
  EXPECT_EQ(acc_tensor_list_get(batch, 1, &y), ACC_OK);
  auto labels = acc_test::to_longs(y);
  acc_tensor_free(y);
  acc_tensor_list_free(batch);
  return labels;
}

std::vector<std::vector<int64_t>> whole_epoch(acc_dataloader* dl) {
  std::vector<std::vector<int64_t>> out;
  for (auto b = next_labels(dl); !b.empty(); b = next_labels(dl)) out.push_back(b);
  return out;
}

int in_epoch(const acc_dataloader* dl) {
  int r = -1;
  EXPECT_EQ(acc_dataloader_in_epoch(dl, &r), ACC_OK) << acc_last_error_message();
  return r;
}

int64_t epoch_of(const acc_dataloader* dl) {
  int64_t e = -1;
  EXPECT_EQ(acc_dataloader_epoch(dl, &e), ACC_OK);
  return e;
}

}  // namespace

TEST(EndEpoch, ALoopLeftEarlyEndsItsEpochAndTheNextStartsTheFollowingOne) {
  acc_dataset* ds = numbered(10);
  acc_dataloader* reference = shuffled(ds);
  const auto epoch0 = whole_epoch(reference);
  const auto epoch1 = whole_epoch(reference);
  ASSERT_EQ(epoch0.size(), 5u);
  ASSERT_NE(epoch0, epoch1);

  acc_dataloader* dl = shuffled(ds);
  EXPECT_EQ(in_epoch(dl), 0);
  ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));  // between epochs: nothing
  EXPECT_EQ(epoch_of(dl), 0);
  EXPECT_EQ(next_labels(dl), epoch0[0]);
  EXPECT_EQ(next_labels(dl), epoch0[1]);
  EXPECT_EQ(in_epoch(dl), 1);
  ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));  // break
  EXPECT_EQ(in_epoch(dl), 0);
  EXPECT_EQ(epoch_of(dl), 1);
  ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));  // again: nothing more
  EXPECT_EQ(epoch_of(dl), 1);
  EXPECT_EQ(whole_epoch(dl), epoch1);  // the following epoch, whole, with its own shuffle
  EXPECT_EQ(in_epoch(dl), 0);
  acc_dataloader_free(dl);
  acc_dataloader_free(reference);
  acc_dataset_free(ds);
}

TEST(EndEpoch, ArgumentsAreChecked) {
  ACC_EXPECT_ERROR(acc_dataloader_end_epoch(nullptr), ACC_ERR_INVALID_HANDLE, "dl");
  int r = 0;
  ACC_EXPECT_ERROR(acc_dataloader_in_epoch(nullptr, &r), ACC_ERR_INVALID_HANDLE, "dl");
  acc_dataset* ds = numbered(4);
  acc_dataloader* dl = shuffled(ds);
  ACC_EXPECT_ERROR(acc_dataloader_in_epoch(dl, nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
  acc_dataloader_free(dl);
  ACC_EXPECT_ERROR(acc_dataloader_end_epoch(dl), ACC_ERR_INVALID_HANDLE, "dl");  // freed
  acc_dataset_free(ds);
}

namespace {

struct Counting {
  int64_t n = 6, cursor = 0;
  std::vector<int64_t> starts;
};

int counting_next(void* user_data, acc_tensor_list** out) {
  auto* s = static_cast<Counting*>(user_data);
  if (s->cursor >= s->n) {
    *out = nullptr;
    return 0;
  }
  const int64_t i = s->cursor++;
  acc_tensor* y = nullptr;
  if (acc_tensor_from_host(&i, sizeof i, nullptr, 0, ACC_DTYPE_INT64, &y) != ACC_OK || acc_tensor_list_create(out) != ACC_OK)
    return 1;
  const bool ok = acc_tensor_list_append(*out, "x", y) == ACC_OK && acc_tensor_list_append(*out, "y", y) == ACC_OK;
  acc_tensor_free(y);
  return ok ? 0 : 1;
}

int counting_start(void* user_data, int64_t epoch) {
  auto* s = static_cast<Counting*>(user_data);
  s->cursor = 0;
  s->starts.push_back(epoch);
  return 0;
}

}  // namespace

TEST(EndEpoch, AStreamRestartsAfterAnEarlyEnd) {
  Counting stream;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_iterator(counting_next, counting_start, &stream, nullptr, 6, &ds));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "batch_size", "2"));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &dl));
  acc_options_free(o);
  EXPECT_EQ(next_labels(dl), (std::vector<int64_t>{0, 1}));
  ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));
  EXPECT_EQ(epoch_of(dl), 1);
  EXPECT_EQ(whole_epoch(dl), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(stream.starts, (std::vector<int64_t>{0, 1}));
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
}

TEST(EndEpoch, APreparedLoaderLeftEarlyCanBeSavedAndLoadedAgain) {
  const std::string dir = acc_test::temp_path("end_epoch_state");
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &acc));
  acc_dataset* ds = numbered(8);
  acc_dataloader* raw = shuffled(ds);
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_prepare_dataloader(acc, raw, ACC_PLACEMENT_DEFAULT, &dl));
  EXPECT_FALSE(next_labels(dl).empty());
  ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
  // Mid-epoch, load_state refuses the loader; after the early end it takes it.
  ACC_EXPECT_ERROR(acc_load_state(acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT, "middle of an epoch");
  ACC_ASSERT_OK(acc_dataloader_end_epoch(dl));
  EXPECT_EQ(in_epoch(dl), 0);
  ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
  EXPECT_EQ(whole_epoch(dl).size(), 3u);  // the saved epoch's rest: batches 2..4 of 4
  acc_dataloader_free(dl);
  acc_dataloader_free(raw);
  acc_dataset_free(ds);
  acc_accelerator_free(acc);
}

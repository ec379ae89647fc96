// acc_find_executable_batch_size: Accelerate's search for a batch size that fits in memory.
#include <string>
#include <vector>

#include "support.h"

namespace {

// A run that fits only up to `limit`, recording every batch size it is given.
struct Fits {
  int64_t limit;
  std::vector<int64_t> tried;
};

int run_fits(void* ud, int64_t batch_size) {
  auto* f = static_cast<Fits*>(ud);
  f->tried.push_back(batch_size);
  return batch_size > f->limit ? ACC_ERR_OUT_OF_MEMORY : ACC_OK;
}

}  // namespace

TEST(BatchSize, ShrinksByATenthUntilTheRunFits) {
  Fits fits{50, {}};
  int64_t found = 0;
  ACC_ASSERT_OK(acc_find_executable_batch_size(128, run_fits, &fits, &found));
  EXPECT_EQ(found, 46);
  EXPECT_EQ(fits.tried, (std::vector<int64_t>{128, 115, 103, 92, 82, 73, 65, 58, 52, 46}));  // int(b * 0.9)
  fits = {1000, {}};
  ACC_ASSERT_OK(acc_find_executable_batch_size(128, run_fits, &fits, &found));
  EXPECT_EQ(found, 128);
  EXPECT_EQ(fits.tried.size(), 1u);
}

TEST(BatchSize, ARealOutOfMemoryFromTheLibraryShrinksTheBatch) {
  if (ACC_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer aborts on allocations this large";
  // Batches above 8 ask for 2^48 bytes a sample: more than any address space.
  auto run = [](void*, int64_t batch_size) -> int {
    const int64_t dims[2] = {batch_size, batch_size > 8 ? int64_t{1} << 46 : 4};
    acc_tensor* t = nullptr;
    const acc_status status = acc_tensor_zeros(dims, 2, ACC_DTYPE_FLOAT32, nullptr, &t);
    acc_tensor_free(t);
    return status;
  };
  int64_t found = 0;
  ACC_ASSERT_OK(acc_find_executable_batch_size(16, run, nullptr, &found));
  EXPECT_EQ(found, 8);  // 16, 14, 12, 10, 9, 8
}

TEST(BatchSize, WhenNothingFitsItIsOutOfMemory) {
  Fits fits{0, {}};
  int64_t found = -1;
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(3, run_fits, &fits, &found), ACC_ERR_OUT_OF_MEMORY,
                   "no executable batch size found: 3 batch sizes from 3 down to 1");
  EXPECT_EQ(fits.tried, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(found, -1);
}

TEST(BatchSize, OtherFailuresEndTheSearchWithTheirStatusAndMessage) {
  int64_t found = 0;
  // The status and message of the library call that failed.
  auto bad_call = [](void*, int64_t) -> int {
    acc_tensor* t = nullptr;
    return acc_tensor_zeros(nullptr, 1, ACC_DTYPE_FLOAT32, nullptr, &t);
  };
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(64, bad_call, nullptr, &found), ACC_ERR_INVALID_ARGUMENT,
                   "the run with batch size 64 failed: dims is NULL");
  // The callback's own message.
  auto own = [](void*, int64_t) -> int {
    acc_callback_set_error("the disk is full");
    return ACC_ERR_IO;
  };
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(64, own, nullptr, &found), ACC_ERR_IO, "failed: the disk is full");
  // A value that is no status.
  auto odd = [](void*, int64_t) -> int {
    acc_callback_set_error("odd");
    return 42;
  };
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(64, odd, nullptr, &found), ACC_ERR_IO, "failed (code 42): odd");
  // Without a message of its own or a failed call inside it: no older message is passed off as its.
  auto silent = [](void*, int64_t) -> int { return 42; };
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(10, silent, nullptr, &found), ACC_ERR_IO, "failed (code 42)");
  EXPECT_EQ(std::string(acc_last_error_message()), "the run with batch size 10 failed (code 42)");
}

TEST(BatchSize, ArgumentsAreChecked) {
  Fits fits{10, {}};
  int64_t found = 0;
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(0, run_fits, &fits, &found), ACC_ERR_INVALID_ARGUMENT,
                   "starting batch size must be at least 1");
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(8, nullptr, &fits, &found), ACC_ERR_INVALID_ARGUMENT, "fn is NULL");
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(8, run_fits, &fits, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "out_batch_size (the out-parameter) is NULL");
  EXPECT_TRUE(fits.tried.empty());
}

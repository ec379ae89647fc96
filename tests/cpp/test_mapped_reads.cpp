// Reading rows of a memory-mapped file that another process may cut short at any moment: an error
// naming the file, never a process killed by SIGBUS.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/bus_error_guard.h"
#include "common/error.h"
#include "tensor/mmap.h"

namespace {

std::string temp_file(const std::string& name) {
  return (testing::TempDir().empty() ? std::string("/tmp/") : testing::TempDir()) + "acc_mapped_" +
         std::to_string(::getpid()) + "_" + name;
}

void write_floats(const std::string& path, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float)));
}

struct ByteRead {
  const volatile char* address;
  char value;
};
void read_byte(void* context) {
  auto* read = static_cast<ByteRead*>(context);
  read->value = *read->address;
}

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

}  // namespace

TEST(BusErrorGuard, AFaultInTheGuardedRangeBecomesFalseAndTheNextReadWorks) {
  const std::string path = temp_file("guard.bin");
  write_floats(path, 3 * kPage / sizeof(float));
  at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {-1});
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kPage)), 0);
  const char* base = static_cast<const char*>(mapped.data_ptr());
  const size_t length = 3 * kPage;
  for (int attempt = 0; attempt < 3; ++attempt) {  // SIGBUS is unblocked again after each jump out
    ByteRead past_end{base + 2 * kPage, 0};
    EXPECT_FALSE(acc::read_guarding_bus_errors(base, length, &read_byte, &past_end)) << "attempt " << attempt;
  }
  ByteRead inside{base + 4, 0};
  EXPECT_TRUE(acc::read_guarding_bus_errors(base, length, &read_byte, &inside));
  EXPECT_EQ(inside.value, reinterpret_cast<const char*>(mapped.data_ptr())[4]);
  std::remove(path.c_str());
}

// The guard takes only its own faults: any other SIGBUS ends the process as before. Each runs in
// a death test's child, which wrote its own file and dies before it could remove it: the file is
// unlinked once mapped (an open descriptor still cuts it).
void fault_outside_the_guarded_range(const std::string& path) {
  at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {-1});
  const int fd = ::open(path.c_str(), O_RDWR);
  ::unlink(path.c_str());
  const char* base = static_cast<const char*>(mapped.data_ptr());
  ByteRead first{base, 0};
  acc::read_guarding_bus_errors(base, 2 * kPage, &read_byte, &first);  // installs the handler
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::_Exit(3);
  ByteRead elsewhere{base + kPage, 0};
  acc::read_guarding_bus_errors(base, kPage, &read_byte, &elsewhere);  // guarded, for another range
  std::_Exit(4);
}

void bus_error_sent_by_kill(const std::string& path) {
  at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {-1});
  ::unlink(path.c_str());
  const char* base = static_cast<const char*>(mapped.data_ptr());
  ByteRead first{base, 0};
  acc::read_guarding_bus_errors(base, kPage, &read_byte, &first);
  ::raise(SIGBUS);  // a signal sent, not a fault
  std::_Exit(4);
}

TEST(BusErrorGuardDeathTest, AFaultOutsideAGuardedReadStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = temp_file("unguarded.bin");
  write_floats(path, 2 * kPage / sizeof(float));
  EXPECT_EXIT(fault_outside_the_guarded_range(path), testing::KilledBySignal(SIGBUS), "");
  write_floats(path, 2 * kPage / sizeof(float));  // a forked child would have cut and unlinked it
  EXPECT_EXIT(bus_error_sent_by_kill(path), testing::KilledBySignal(SIGBUS), "");
  std::remove(path.c_str());
}

TEST(MappedRows, EqualIndexSelectForContiguousNarrowedAndPermutedViews) {
  const std::string path = temp_file("rows.bin");
  write_floats(path, 6 * 4 * 5);
  at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {6, 4, 5});
  const std::vector<int64_t> indices{4, 0, 3, 3, 1};  // within every view's 5 or 6 rows
  const at::Tensor idx = at::tensor(indices, at::kLong);
  const std::vector<at::Tensor> views{mapped,
                                      mapped.narrow(2, 1, 3),
                                      mapped.permute({0, 2, 1}),
                                      mapped.select(2, 4),
                                      mapped.narrow(0, 1, 5).unsqueeze(1).expand({5, 2, 4, 5})};
  for (size_t v = 0; v < views.size(); ++v) {
    ASSERT_TRUE(acc::is_mapped_file(views[v]));
    const at::Tensor rows = acc::select_mapped_rows(views[v], indices);
    const at::Tensor expected = views[v].index_select(0, idx);
    EXPECT_TRUE(rows.is_contiguous());
    EXPECT_TRUE(at::equal(rows, expected)) << "view " << v;
  }
  EXPECT_EQ(acc::select_mapped_rows(mapped, {}).sizes(), (std::vector<int64_t>{0, 4, 5}));
  std::remove(path.c_str());
}

// Another thread cuts the file at a random moment while rows are read over and over: each read
// gives the rows or an Io error naming the file. Before the guard, a cut during a read killed the
// process.
TEST(MappedRows, AFileCutDuringReadsIsAnErrorNamingIt) {
  const std::string path = temp_file("race.bin");
  constexpr int64_t kRows = 64, kRowFloats = 16384;  // 64 KiB rows, 4 MiB in all
  std::mt19937 random(1234);
  std::vector<int64_t> all(kRows);
  for (int64_t i = 0; i < kRows; ++i) all[static_cast<size_t>(i)] = kRows - 1 - i;
  int errors = 0;
  for (int round = 0; round < 40; ++round) {
    write_floats(path, static_cast<size_t>(kRows * kRowFloats));
    at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {kRows, kRowFloats});
    const at::Tensor expected = mapped.index_select(0, at::tensor(all, at::kLong));
    std::atomic<bool> cut{false};
    const auto delay = std::chrono::microseconds(random() % 3000);
    std::thread cutter([&] {
      std::this_thread::sleep_for(delay);
      if (::truncate(path.c_str(), static_cast<off_t>(kPage)) == 0) cut = true;
    });
    for (bool failed = false; !failed && !cut;) {
      try {
        EXPECT_TRUE(at::equal(acc::select_mapped_rows(mapped, all), expected));
      } catch (const acc::Error& e) {
        EXPECT_EQ(e.status(), acc::Status::Io);
        EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
        failed = true;
        ++errors;
      }
    }
    cutter.join();
    EXPECT_THROW(acc::select_mapped_rows(mapped, all), acc::Error) << "round " << round;
  }
  EXPECT_GT(errors, 0);
  std::remove(path.c_str());
}

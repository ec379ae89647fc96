#include "common/system_random.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <random>

namespace acc {

uint64_t system_random_bits() {
  // Never destroyed: trackers' writer threads draw ids while a process that left them open exits.
  struct Source {
    std::mutex mutex;
    std::random_device device;
  };
  static Source* const source = new Source;
  std::lock_guard<std::mutex> lock(source->mutex);
  return (static_cast<uint64_t>(source->device()) << 32) ^ source->device();
}

std::string uuid4_hex() {
  // A generator per thread, seeded from the system's source (whose every draw is a system call) and
  // seeded again in a child process after fork(), which would otherwise repeat the parent's ids.
  thread_local std::mt19937_64 engine;
  thread_local pid_t seeded_in = 0;
  if (seeded_in != ::getpid()) {
    std::seed_seq seed{system_random_bits(), system_random_bits()};
    engine.seed(seed);
    seeded_in = ::getpid();
  }
  uint64_t high = engine(), low = engine();
  high = (high & ~(uint64_t{0xf} << 12)) | (uint64_t{4} << 12);  // the version nibble: 4
  low = (low & ~(uint64_t{0x3} << 62)) | (uint64_t{0x2} << 62);  // the variant: 10xx
  char digits[33];
  std::snprintf(digits, sizeof digits, "%016" PRIx64 "%016" PRIx64, high, low);
  return digits;
}

std::string uuid4_text() {
  const std::string hex = uuid4_hex();
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

}  // namespace acc

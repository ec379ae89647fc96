#include "common/system_random.h"

#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <random>

namespace acc {

uint64_t system_random_bits() {
  static std::mutex mutex;
  static std::random_device source;
  std::lock_guard<std::mutex> lock(mutex);
  return (static_cast<uint64_t>(source()) << 32) ^ source();
}

std::string uuid4_hex() {
  uint64_t high = system_random_bits(), low = system_random_bits();
  high = (high & ~(uint64_t{0xf} << 12)) | (uint64_t{4} << 12);  // the version nibble: 4
  low = (low & ~(uint64_t{0x3} << 62)) | (uint64_t{0x2} << 62);  // the variant: 10xx
  char digits[33];
  std::snprintf(digits, sizeof digits, "%016" PRIx64 "%016" PRIx64, high, low);
  return digits;
}

}  // namespace acc

#include "tracking/tfrecord.h"

#include <cstdint>

#include "tracking/crc32c.h"

namespace acc::tracking {
namespace {

template <typename Int>
void put_le(std::string& out, Int value) {
  for (size_t i = 0; i < sizeof(Int); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

void append_tfrecord(std::string& out, const std::string& data) {
  std::string length;
  put_le<uint64_t>(length, data.size());
  out += length;
  put_le<uint32_t>(out, masked_crc32c(length.data(), length.size()));
  out += data;
  put_le<uint32_t>(out, masked_crc32c(data.data(), data.size()));
}

}  // namespace acc::tracking

#include "tracking/tfrecord.h"

#include <cstdint>

#include "common/little_endian.h"
#include "tracking/crc32c.h"

namespace acc::tracking {

void append_tfrecord(std::string& out, const std::string& data) {
  std::string length;
  put_le(length, data.size(), 8);
  out += length;
  put_le(out, masked_crc32c(length.data(), length.size()), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
}

}  // namespace acc::tracking

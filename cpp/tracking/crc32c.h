// TFRecord's "masked" CRC-32C (common/crc32c.h computes the CRC itself).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/crc32c.h"

namespace acc::tracking {

using acc::crc32c;

// TFRecord stores ((crc >> 15) | (crc << 17)) + 0xa282ead8: a CRC of data that itself holds CRCs
// would otherwise be degenerate.
inline uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

}  // namespace acc::tracking

// zlib's CRC-32 (the zip and PNG checksum) over a buffer of any size: zlib takes at most 4 GiB a call.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace acc {

// `crc` carried on over `size` bytes; start from crc32_start().
inline uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  uLong value = crc;
  const auto* bytes = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < size;) {
    const size_t chunk = std::min<size_t>(size - done, size_t{1} << 30);
    value = crc32(value, bytes + done, static_cast<uInt>(chunk));
    done += chunk;
  }
  return static_cast<uint32_t>(value);
}

inline uint32_t crc32_start() { return static_cast<uint32_t>(crc32(0L, Z_NULL, 0)); }

}  // namespace acc

// CRC-32C (Castagnoli), the checksum of TFRecord framing, and TFRecord's "masked" form of it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace acc::tracking {

// CRC-32C of `size` bytes (reflected polynomial 0x82F63B78, initial value and final xor ~0).
uint32_t crc32c(const void* data, size_t size);

// TFRecord stores ((crc >> 15) | (crc << 17)) + 0xa282ead8: a CRC of data that itself holds CRCs
// would otherwise be degenerate.
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace acc::tracking

// CRC-32C (Castagnoli): the checksum of TFRecord framing and of checkpoint file records. SSE4.2's
// crc32 instruction where the CPU has it (about 3x zlib's CRC-32 here), slicing-by-8 tables elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace acc {

// CRC-32C of `size` bytes (reflected polynomial 0x82F63B78, initial value and final xor ~0).
uint32_t crc32c(const void* data, size_t size);
// The CRC-32C of what `crc` was computed over followed by `size` more bytes (crc32c_extend(0, ...)
// starts one): files are checksummed a piece at a time.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

}  // namespace acc

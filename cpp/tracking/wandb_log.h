// W&B's transaction log (a run's .wandb file), byte for byte as wandb's own writer frames it: a
// 7-byte header (":W&B", magic 0xBEE1 little-endian, version 0), then LevelDB's log format in 32 KiB
// blocks counted from the file's start: each chunk a little-endian CRC-32 (zlib's, over the chunk
// type and the payload), a 2-byte length, a type (full, first, middle, last) and the payload; a
// chunk never crosses a block, and fewer than 7 bytes left in a block are zeros.
#pragma once

#include <cstdint>
#include <string>

namespace acc::tracking::wandb {

// The header a .wandb file starts with.
std::string log_header();

// The bytes that append `payload` (one serialized record) to a log whose size is `offset` bytes
// (the header included).
std::string framed_record(const std::string& payload, uint64_t offset);

}  // namespace acc::tracking::wandb

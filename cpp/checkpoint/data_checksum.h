// A CRC-32 of a safetensors file's tensor data, recorded in its metadata by save_state and checked
// by load_state: safetensors itself checks only its header, so a flipped bit in the data (a weight,
// an optimizer moment, a generator state) would otherwise load as a silently different checkpoint.
// Files written before the checksum existed have none and load as before.
#pragma once

#include <string>

#include "checkpoint/safetensors.h"

namespace acc {

inline constexpr const char* kDataCrcKey = "data_crc32";

// zlib's CRC-32 over the tensors' bytes in the order of their names (decimal text).
std::string data_crc32(const NamedTensors& tensors);
// `metadata` with the checksum of `tensors` added.
Metadata with_data_crc32(Metadata metadata, const NamedTensors& tensors);
// Refuses (an Io error naming `path`) tensors whose checksum differs from the one `metadata` records.
void check_data_crc32(const Metadata& metadata, const NamedTensors& tensors, const std::string& path);

}  // namespace acc

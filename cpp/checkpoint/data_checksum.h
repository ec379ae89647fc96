// A CRC-32 of a shard file's tensor data, recorded in its metadata: safetensors itself checks only
// its header, and a shard is also read without its checkpoint's manifest (merge-weights). The other
// checkpoint files are covered by the manifest's file records (file_records.h). Shards written before
// the checksum existed have none and load as before.
#pragma once

#include <string>

#include "checkpoint/safetensors.h"

namespace acc {

inline constexpr const char* kDataCrcKey = "data_crc32";

// `metadata` with the checksum of `tensors` added: zlib's CRC-32 over their bytes in the order of
// their names (decimal text).
Metadata with_data_crc32(Metadata metadata, const NamedTensors& tensors);
// Refuses (an Io error naming `path`) tensors whose checksum differs from the one `metadata` records.
void check_data_crc32(const Metadata& metadata, const NamedTensors& tensors, const std::string& path);

}  // namespace acc

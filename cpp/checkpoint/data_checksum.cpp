#include "checkpoint/data_checksum.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"

namespace acc {
namespace {

std::string data_crc32(const NamedTensors& tensors) {
  std::vector<const NamedTensors::value_type*> sorted;
  for (const auto& entry : tensors) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  uint32_t crc = crc32_start();
  for (const auto* entry : sorted) {
    const at::Tensor t = entry->second.to(at::kCPU).contiguous();
    crc = crc32_update(crc, t.data_ptr(), t.nbytes());
  }
  return std::to_string(crc);
}

}  // namespace

Metadata with_data_crc32(Metadata metadata, const NamedTensors& tensors) {
  metadata[kDataCrcKey] = data_crc32(tensors);
  return metadata;
}

void check_data_crc32(const Metadata& metadata, const NamedTensors& tensors, const std::string& path) {
  auto crc = metadata.find(kDataCrcKey);
  if (crc != metadata.end() && crc->second != data_crc32(tensors))
    fail(Status::Io, "checkpoint file '", path, "' is corrupt: its data does not match the checksum it was written with");
}

}  // namespace acc

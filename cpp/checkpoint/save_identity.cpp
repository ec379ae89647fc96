#include "checkpoint/save_identity.h"

#include <ATen/ATen.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "checkpoint/checkpoint_dir.h"
#include "common/error.h"
#include "common/system_random.h"

namespace acc {

std::string new_save_id(Collectives& collectives) {
  const uint64_t mine[2] = {system_random_bits(), system_random_bits()};
  at::Tensor id = at::empty({2}, at::kLong);
  std::memcpy(id.data_ptr<int64_t>(), mine, sizeof(mine));
  id = collectives.broadcast(id, 0, "save_state (sharing the save's id)", Collectives::Layouts::AgreedByCaller);
  uint64_t shared[2];
  std::memcpy(shared, id.data_ptr<int64_t>(), sizeof(shared));
  char text[33];
  std::snprintf(text, sizeof(text), "%016" PRIx64 "%016" PRIx64, shared[0], shared[1]);
  return text;
}

void check_save_id(const Metadata& metadata, const std::string& expected, const std::string& path) {
  if (expected.empty()) return;
  auto it = metadata.find(kSaveIdKey);
  if (it == metadata.end() || it->second != expected)
    fail(Status::Io, "checkpoint file '", path, "' was written by another save than the checkpoint's manifest ",
         kCheckpointManifest, " (",
         it == metadata.end() ? std::string("it records none") : "save " + it->second, ", the manifest save ", expected,
         "): copied from another checkpoint?");
}

}  // namespace acc

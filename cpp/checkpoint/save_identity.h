// A save's identity: a random number drawn by the main process for each save_state and shared with
// every process. The manifest records it, and so does every file a process writes for itself (model
// and optimizer shards, random states), so that a checkpoint assembled from two saves of the same job
// (one process's shard copied from another checkpoint) is refused instead of resuming on a mix that
// no process ever held. Drawn from std::random_device: the training's generators are not touched.
#pragma once

#include <string>

#include "checkpoint/safetensors.h"
#include "ops/collectives.h"

namespace acc {

inline constexpr const char* kSaveIdKey = "save_id";

// A collective: every process gets the main process's draw (32 hexadecimal digits).
std::string new_save_id(Collectives& collectives);
// Refuses a per-process file whose metadata records another save than the manifest (`expected`);
// nothing to check where the manifest records none (a checkpoint written before the id existed).
void check_save_id(const Metadata& metadata, const std::string& expected, const std::string& path);

}  // namespace acc

// save_state and load_state over a list of checkpoint parts: the folder is written under a
// temporary name, completed by a manifest and published by a rename (then automatic checkpoints are
// cleaned up and rotated); loading reads and checks every part on every process before any of them
// is applied. Each phase ends with every process agreeing on its outcome, so that all fail alike.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_part.h"
#include "ops/collectives.h"

namespace acc {

using CheckpointHook = std::function<void(const std::string& dir)>;

struct CheckpointSave {
  std::string target;                  // the folder
  bool automatic = false;              // project_dir/checkpoints/checkpoint_<i>: clean up and rotate after
  std::string project_dir;
  std::optional<int64_t> total_limit;  // automatic checkpoints kept
  bool writer = true;                  // this process writes the shared files
  nlohmann::json manifest;             // written last: marks the folder complete
  std::vector<CheckpointHook> hooks;   // called with the target before anything is written
};

struct CheckpointLoad {
  std::string source;
  std::function<void()> precheck;      // before the hooks (may be empty)
  std::vector<CheckpointHook> hooks;   // called with the source before anything is read
  // Checks the manifest (its path for messages) against the live state; returns what to apply with
  // the parts (may be empty).
  std::function<std::function<void()>(const nlohmann::json& manifest, const std::string& path)> check_manifest;
  // Set by check_manifest when the checkpoint comes from another number of processes: parts that
  // are process_local() are then not read.
  bool other_process_count = false;
};

void save_accelerator_state(const CheckpointSave& save, const CheckpointParts& parts, Collectives& collectives);
void load_accelerator_state(CheckpointLoad& load, const CheckpointParts& parts, Collectives& collectives);

}  // namespace acc

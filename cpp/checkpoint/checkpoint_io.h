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

#include "checkpoint/checkpoint_models.h"
#include "checkpoint/checkpoint_part.h"
#include "ops/collectives.h"

namespace acc {

// A pre-hook: handed the models whose weights the checkpoint holds (it may remove those it saves or
// loads itself) and the folder. A save's hooks get the folder asked for, which exists then (made as
// Accelerate makes output_dir): what they write into it moves into the checkpoint being written
// beside it, which replaces the folder once complete, and is recorded in its manifest.
using CheckpointHook = std::function<void(CheckpointModels& models, const std::string& dir)>;
// A checkpoint's parts, with weight files for the models the hooks left.
using CheckpointPartsOf = std::function<CheckpointParts(const CheckpointModels& models)>;

// The manifest's list of the models whose weights the checkpoint holds (prepare-order indices); a
// checkpoint without it holds every model's.
inline constexpr const char* kManifestModelWeightsKey = "model_weights";

struct CheckpointSave {
  std::string target;                  // the folder
  bool automatic = false;              // project_dir/checkpoints/checkpoint_<i>: clean up and rotate after
  std::string project_dir;
  std::optional<int64_t> total_limit;  // automatic checkpoints kept
  bool writer = true;                  // this process writes the shared files
  nlohmann::json manifest;             // written last: marks the folder complete
  CheckpointModels models;             // handed to the hooks
  std::vector<CheckpointHook> hooks;   // called with the target before the library writes
};

struct CheckpointLoad {
  std::string source;
  std::function<void()> precheck;      // before the hooks (may be empty)
  CheckpointModels models;             // handed to the hooks; the weights loaded are those left
  std::vector<CheckpointHook> hooks;   // called with the source before anything is read
  // Checks the manifest (its path for messages) against the live state and the models the hooks
  // left; returns what to apply with the parts (may be empty).
  std::function<std::function<void()>(const nlohmann::json& manifest, const std::string& path)> check_manifest;
  // Set by check_manifest when the checkpoint comes from another number of processes: parts that
  // are process_local() are then not read.
  bool other_process_count = false;
  // A folder Python Accelerate's save_state wrote (no manifest, its random_states_0.pkl there):
  // checked by check_python_layout against the live state, then read through python_parts_of. Both
  // empty: such a folder is refused as incomplete.
  std::function<void(const std::string& dir)> check_python_layout;
  CheckpointPartsOf python_parts_of;
  bool python_layout = false;  // set when the folder read was such a folder
};

void save_accelerator_state(CheckpointSave& save, const CheckpointPartsOf& parts_of, Collectives& collectives);
void load_accelerator_state(CheckpointLoad& load, const CheckpointPartsOf& parts_of, Collectives& collectives);

}  // namespace acc

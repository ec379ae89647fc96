// One piece of a save_state checkpoint: a kind of state and its file. Each kind supplies its parts
// beside its own code (weights in model/, optimizer and scheduler in optim/, loader positions in
// data/, the GradScaler in precision/, random states here, registered objects in accelerator/);
// save_accelerator_state / load_accelerator_state (checkpoint_io.h) loop over them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace acc {

// What loading a part read and checked. `apply` changes the live state and cannot fail on a bad
// file. A part whose state can only be checked by loading it (a registered object's callback may
// refuse its bytes) gives a `rollback` too: its apply runs first, and is undone if any fails.
struct StagedLoad {
  std::function<void()> apply;
  std::function<void()> rollback;  // empty for parts whose apply cannot fail
  // Lines every process must have read alike from its own file (PowerSGD's iteration: processes
  // that disagree would run different collectives), compared with process 0's before anything changes.
  std::string shared;
};

class CheckpointPart {
 public:
  virtual ~CheckpointPart() = default;
  // The file's name in the checkpoint folder (Accelerate's names where a file plays the same role).
  virtual std::string file() const = 0;
  // Each process writes and reads its own file (RNG states, loader positions); otherwise the file
  // is shared: written by the main process, read by every process.
  virtual bool per_process() const { return false; }
  // State of one process's run (RNG streams, loader positions): loading a checkpoint on another
  // number of processes leaves it as it is. Shards of the model's state are per process but not this.
  virtual bool process_local() const { return per_process(); }
  // Whether this process writes its per-process file (hybrid sharding: one machine writes the
  // shards every machine holds).
  virtual bool writes_here() const { return true; }
  // A step every process runs before any file is written: a collective that gathers what the writer
  // saves (sharded state consolidated into one file). Most parts have nothing to gather.
  virtual void collect() {}
  virtual void save(const std::string& path) const = 0;
  // Reads and checks the file; errors name it. Nothing changes until the result is applied.
  virtual StagedLoad load(const std::string& path) const = 0;

  // The save being written, or the one the manifest being loaded records (empty if it records
  // none): per-process files record it and refuse another (checkpoint/save_identity.h).
  void set_save_id(std::string id) { save_id_ = std::move(id); }
  const std::string& save_id() const { return save_id_; }

 private:
  std::string save_id_;
};

using CheckpointParts = std::vector<std::unique_ptr<CheckpointPart>>;

// Accelerate's names for the i-th object of a kind: model.safetensors, model_1.safetensors, ...
std::string indexed_name(const std::string& stem, size_t i, const std::string& extension);

}  // namespace acc

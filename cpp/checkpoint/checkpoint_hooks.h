// save_state's and load_state's pre-hooks, each kept under an id that removes it again (what
// Accelerate's register_*_state_pre_hook hand back: torch's RemovableHandle).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "checkpoint/checkpoint_io.h"

namespace acc {

class CheckpointHooks {
 public:
  enum class Kind { Save, Load };
  // The hook's id: 1, 2, ... in registration order, shared by both kinds.
  uint64_t add(Kind kind, CheckpointHook hook);
  // Removes the hook with that id; a removed id again is a no-op (as RemovableHandle.remove()), an id
  // never given is an error. A save or load in progress still runs the hooks it started with.
  void remove(uint64_t id);
  // The hooks of a kind, in registration order.
  std::vector<CheckpointHook> of(Kind kind) const;

 private:
  mutable std::mutex mutex_;
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::pair<Kind, CheckpointHook>> hooks_;
};

}  // namespace acc

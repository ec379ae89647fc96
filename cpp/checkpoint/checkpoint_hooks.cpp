#include "checkpoint/checkpoint_hooks.h"

#include <utility>

#include "common/error.h"

namespace acc {

uint64_t CheckpointHooks::add(Kind kind, CheckpointHook hook) {
  require(static_cast<bool>(hook), "the hook is empty");
  const std::lock_guard<std::mutex> lock(mutex_);
  hooks_.emplace(++last_id_, std::make_pair(kind, std::move(hook)));
  return last_id_;
}

void CheckpointHooks::remove(uint64_t id) {
  CheckpointHook removed;  // destroyed after the lock: freeing a host's data may call back in
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    require(id >= 1 && id <= last_id_, "no state pre-hook has the id ", id, " (ids given so far: 1 to ", last_id_, ")");
    const auto it = hooks_.find(id);
    if (it == hooks_.end()) return;
    removed = std::move(it->second.second);
    hooks_.erase(it);
  }
}

std::vector<CheckpointHook> CheckpointHooks::of(Kind kind) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CheckpointHook> hooks;
  for (const auto& [id, entry] : hooks_)
    if (entry.first == kind) hooks.push_back(entry.second);
  return hooks;
}

}  // namespace acc

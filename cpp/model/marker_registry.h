// What the JIT markers of a marked TorchScript forward (script_units.h, script_lora.h) act on, by
// the model's token: the markers are process-wide operators, the models many. Thread-safe; an entry
// is taken as a shared pointer so that it outlives a concurrent removal.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace acc {

template <class Entry>
class MarkerRegistry {
 public:
  std::shared_ptr<Entry> find(int64_t token) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(token);
    return it == entries_.end() ? nullptr : it->second;
  }
  // A null entry removes the token's.
  void set(int64_t token, std::shared_ptr<Entry> entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entry) entries_[token] = std::move(entry);
    else entries_.erase(token);
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<int64_t, std::shared_ptr<Entry>> entries_;
};

}  // namespace acc

// What an Accelerator prepared of one kind, in prepare order (the order of their checkpoint files),
// each under the object it wraps so that preparing that object again gives the same wrapper. Held
// weakly: the program owns them, and what it dropped is skipped. The wrapped object is held weakly
// too, so that a new object at the address of a freed one is not taken for it. Threads of one
// accelerator prepare and train at once: every call holds the set's lock.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace acc {

template <typename T>
class PreparedSet {
 public:
  void add(const std::shared_ptr<const void>& original, const std::shared_ptr<T>& prepared) {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.prepared.expired(); }),
                   entries_.end());
    entries_.push_back({original.get(), prepared.get(), original, prepared});
  }
  // The live wrapper of `original`, or null.
  std::shared_ptr<T> find(const std::shared_ptr<const void>& original) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (it->address == original.get() && !it->original.expired())
        if (auto prepared = it->prepared.lock()) return prepared;
    return nullptr;
  }
  // Whether `object` is one of the wrappers.
  bool holds(const void* object) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    // By address (no reference taken: dropping the last one here would destroy a wrapper under the lock).
    for (const auto& e : entries_)
      if (e.wrapper == object && !e.prepared.expired()) return true;
    return false;
  }
  // Calls f on each live wrapper, in order, without collecting them (for the training step): under
  // the lock, so f must not prepare or look up in this set.
  template <typename F>
  void each(F f) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : entries_)
      if (auto prepared = e.prepared.lock()) f(*prepared);
  }
  std::vector<std::shared_ptr<T>> live() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> alive;
    for (const auto& e : entries_)
      if (auto prepared = e.prepared.lock()) alive.push_back(std::move(prepared));
    return alive;
  }
  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  struct Entry {
    const void* address;
    const void* wrapper;
    std::weak_ptr<const void> original;
    std::weak_ptr<T> prepared;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace acc

// An object's own callbacks: the user's code that an operation of the object runs (a dataset's
// sample or collate function while a loader fetches, a schedule's factor or scale function, a
// program's tracker). A call into that object from inside such a callback would change what the
// running operation relies on (free the prefetcher it reads from, grow the list it walks, step the
// schedule it is stepping), so it is refused. Marks are per thread: a loader's background workers
// mark the callbacks they run, so a worker's callback is refused too.
#pragma once

#include <memory>

namespace acc {

// While it lives, this thread runs callbacks of `owner` (and of `also`, an object that `owner`
// serves, where not null).
class OwnCallbacksRunning {
 public:
  explicit OwnCallbacksRunning(const void* owner, const void* also = nullptr);
  ~OwnCallbacksRunning();
  OwnCallbacksRunning(const OwnCallbacksRunning&) = delete;
  OwnCallbacksRunning& operator=(const OwnCallbacksRunning&) = delete;

 private:
  const void* owner_;
  const void* also_;
};

// Whether this thread is inside a callback that `owner` runs.
bool inside_own_callbacks(const void* owner);
// Drops `last_reference` to `owner`: on this thread, or, where this thread is inside a callback
// `owner` runs (a loader's worker fetching), on another thread, whose destruction of `owner` then
// waits for that callback's call to end (a worker cannot wait for itself).
void drop_outside_own_callbacks(std::shared_ptr<const void> last_reference, const void* owner);
// Fails (InvalidArgument) where this thread is inside a callback that `owner` runs: `call` names the
// refused operation, `object` what `owner` is ("data loader").
void refuse_inside_own_callbacks(const void* owner, const char* object, const char* call);

}  // namespace acc

// An object's own callbacks: the user's code that an operation of the object runs (a dataset's
// sample or collate function while a loader fetches, a schedule's factor or scale function, a
// program's tracker). A call into that object from inside such a callback would change what the
// running operation relies on (free the prefetcher it reads from, grow the list it walks, step the
// schedule it is stepping), so it is refused. Marks are per thread: a loader's background workers
// mark the callbacks they run, so a worker's callback is refused too.
#pragma once

#include <functional>
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
// Runs `destroy` (the deletion of `owner`, its last reference gone): on this thread, or, where this
// thread is inside a callback `owner` runs (a loader's worker fetching, whatever dropped the last
// reference: the handle, a checkpoint's list of loaders), on another thread, whose destruction of
// `owner` then waits for that callback's call to end (a worker cannot wait for itself, and the
// callback's caller still uses `owner` once the callback returns).
void destroy_outside_own_callbacks(const void* owner, std::function<void()> destroy);
// A shared_ptr owning `object` that is destroyed outside its own callbacks (above).
template <class T, class Owner>
std::shared_ptr<T> shared_outside_own_callbacks(T* object) {
  return std::shared_ptr<T>(
      object, [](T* p) { destroy_outside_own_callbacks(static_cast<const Owner*>(p), [p] { delete p; }); });
}
// Fails (InvalidArgument) where this thread is inside a callback that `owner` runs: `call` names the
// refused operation, `object` what `owner` is ("data loader").
void refuse_inside_own_callbacks(const void* owner, const char* object, const char* call);

}  // namespace acc

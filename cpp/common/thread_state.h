// Per-thread state that stays usable after the thread's C++ thread-locals are destroyed: glibc
// destroys them before the thread's pthread key destructors run, and before atexit handlers at
// exit(), and either may call into the library (a binding releasing per-thread resources). A plain
// thread_local object would then be used after its destruction; here the value lives on the heap
// behind a trivially destructible thread-local pointer. The thread-locals' destruction frees it; a
// use after that makes a new one, which is never freed (only such late calls pay for it).
#pragma once

namespace acc {

// The calling thread's T, made on first use; `Tag` tells apart states of one type.
template <typename T, typename Tag>
T& thread_state() {
  static thread_local T* value = nullptr;
  struct Owner {
    ~Owner() {
      delete value;
      value = nullptr;
    }
  };
  static thread_local Owner owner;  // its destructor runs with the thread's thread-locals
  static_cast<void>(owner);
  if (!value) value = new T();
  return *value;
}

}  // namespace acc

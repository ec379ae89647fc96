// Every C function runs its body through guarded(): no exception crosses the ABI, and a failure
// leaves its status, message and backtrace in thread-local storage for acc_last_error_*.
#pragma once

#include "accelerate.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace acc::capi {

// Maps the exception being handled to a status and records it (call only inside a catch block).
acc_status translate_current_exception() noexcept;

// The handles a C function reaches through live() stay alive until it returns: a handle freed
// meanwhile (by another thread, or by a callback of this call) is destroyed only then. A binding's
// close() or garbage collector racing a call on the same object must not free it under the call.
class PinScope {
 public:
  PinScope() noexcept;
  ~PinScope();
  PinScope(const PinScope&) = delete;
  PinScope& operator=(const PinScope&) = delete;

 private:
  size_t mark_;
};

template <typename Body>
acc_status guarded(Body&& body) noexcept {
  PinScope pins;
  try {
    body();
    return ACC_OK;
  } catch (...) {
    return translate_current_exception();
  }
}

const std::string& last_message();
// How many errors this thread has recorded: whether last_message is newer than a moment.
uint64_t errors_recorded();
const std::string& last_backtrace();
acc_status last_status();

}  // namespace acc::capi

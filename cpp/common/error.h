// Errors of the library: one exception type that carries the status the C API reports.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

namespace acc {

// The same values as acc_status in accelerate.h (checked there with static_asserts).
enum class Status : int {
  Ok = 0,
  InvalidArgument = 1,
  InvalidHandle = 2,
  NotInitialized = 3,
  Unsupported = 4,
  OutOfMemory = 5,
  Timeout = 6,
  Aborted = 7,
  Distributed = 8,
  Io = 9,
  VersionMismatch = 10,
  Internal = 11,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message);
  Status status() const noexcept { return status_; }
  // Where the error was raised (empty when backtraces are not available). Only the raw return
  // addresses are captured when the error is raised (microseconds); they are named on first request.
  std::string backtrace() const;

 private:
  Status status_;
  std::vector<void*> frames_;
};

// Whether libtorch's message says an allocation failed: a host allocation ("DefaultCPUAllocator:
// can't allocate memory" in 1.x, "...: not enough memory" in 2.x, raised as a plain c10::Error) or a
// GPU's ("CUDA out of memory"), as it reads once the TorchScript interpreter has rethrown it as text.
bool is_allocation_failure_message(const std::string& message);

template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// Throws acc::Error with the parts of the message streamed together.
template <typename... Parts>
[[noreturn]] void fail(Status status, Parts&&... parts) {
  throw Error(status, concat(std::forward<Parts>(parts)...));
}

// Throws InvalidArgument unless `condition` holds.
template <typename... Parts>
void require(bool condition, Parts&&... parts) {
  if (!condition) fail(Status::InvalidArgument, std::forward<Parts>(parts)...);
}

}  // namespace acc

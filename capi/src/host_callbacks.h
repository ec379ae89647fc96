// Plumbing shared by every C API entry point that takes callbacks of the host program: ownership of
// the host's user_data, and turning a callback's non-zero return into an error with its message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "accelerate.h"

namespace acc::capi {

// Owns the host's user_data: frees it with the host's function when the last user is gone.
std::shared_ptr<void> hold_user_data(void* user_data, acc_free_fn free_user_data);

// Runs a callback (a function returning the host's int status). A non-zero status becomes an
// acc::Error (ACC_ERR_IO) naming `what`, with the message the callback left with
// acc_callback_set_error.
template <typename Call>
void invoke_host(const std::string& what, Call call);

// One run of a host callback: the message it leaves with acc_callback_set_error, and the errors
// recorded on this thread since it began, are its own. A callback run inside another (the host
// called the library from a callback) keeps the outer run's and gives them back when it ends, so
// the outer failure still reports its own message.
class HostCallbackRun {
 public:
  HostCallbackRun();
  ~HostCallbackRun();
  HostCallbackRun(const HostCallbackRun&) = delete;
  HostCallbackRun& operator=(const HostCallbackRun&) = delete;

  // The callback returned non-zero `code`: an acc::Error (ACC_ERR_IO) naming `what`, with the
  // message the callback left or else that of the library call that failed inside it.
  [[noreturn]] void failed(const std::string& what, int code) const;
  // A callback that returns an acc_status (the batch-size search's run) failed with `code`: an
  // acc::Error with that status (ACC_ERR_IO for a value that is none), naming `what`, with the
  // message the callback left or else that of the library call that failed inside it.
  [[noreturn]] void failed_with_status(const std::string& what, int code) const;

 private:
  std::string outer_message_;
  uint64_t outer_errors_before_;
};

template <typename Call>
void invoke_host(const std::string& what, Call call) {
  const HostCallbackRun run;
  if (const int code = call()) run.failed(what, code);
}

}  // namespace acc::capi

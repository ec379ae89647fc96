// Plumbing shared by every C API entry point that takes callbacks of the host program: ownership of
// the host's user_data, and turning a callback's non-zero return into an error with its message.
#pragma once

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

// A callback that returns an acc_status (the batch-size search's run) failed with `code`: an
// acc::Error with that status (ACC_ERR_IO for a value that is none), naming `what`, with the message
// the callback left or else that of the library call that failed.
[[noreturn]] void host_status_failed(const std::string& what, int code);

// Implementation details of invoke_host (clear_callback_error also before host_status_failed's call).
void clear_callback_error();
[[noreturn]] void host_callback_failed(const std::string& what, int code);

template <typename Call>
void invoke_host(const std::string& what, Call call) {
  clear_callback_error();
  if (const int code = call()) host_callback_failed(what, code);
}

}  // namespace acc::capi

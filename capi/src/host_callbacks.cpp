#include "host_callbacks.h"

#include "common/error.h"
#include "common/thread_state.h"
#include "guard.h"

namespace acc::capi {
namespace {

// The message a failing callback leaves with acc_callback_set_error (per thread: callbacks run on
// loader threads too).
struct CallbackErrorTag;
// The message a host callback's failure left (acc_callback_error).
std::string& callback_error() { return acc::thread_state<std::string, CallbackErrorTag>(); }
// errors_recorded() when the callback began: a library call's error inside it is newer.
thread_local uint64_t g_errors_before_callback = 0;

}  // namespace

std::shared_ptr<void> hold_user_data(void* user_data, acc_free_fn free_user_data) {
  return std::shared_ptr<void>(user_data, [free_user_data](void* p) {
    if (free_user_data) free_user_data(p);
  });
}

HostCallbackRun::HostCallbackRun()
    : outer_message_(std::move(callback_error())), outer_errors_before_(g_errors_before_callback) {
  callback_error().clear();
  g_errors_before_callback = errors_recorded();
}

HostCallbackRun::~HostCallbackRun() {
  callback_error() = std::move(outer_message_);
  g_errors_before_callback = outer_errors_before_;
}

namespace {

// The callback's own message, else that of a library call that failed inside it (never an older one).
std::string callback_message() {
  const bool failed_inside = errors_recorded() != g_errors_before_callback;
  return !callback_error().empty() ? callback_error() : failed_inside ? last_message() : "";
}

}  // namespace

void HostCallbackRun::failed(const std::string& what, int code) const {
  const std::string message = callback_message();
  acc::fail(acc::Status::Io, what, " failed (code ", code, ")", message.empty() ? "" : ": " + message);
}

void HostCallbackRun::failed_with_status(const std::string& what, int code) const {
  const std::string message = callback_message();
  const bool status = code > ACC_OK && code <= ACC_ERR_INTERNAL;
  acc::fail(status ? static_cast<acc::Status>(code) : acc::Status::Io, what, " failed",
            status ? "" : " (code " + std::to_string(code) + ")", message.empty() ? "" : ": " + message);
}

}  // namespace acc::capi

extern "C" {

void acc_callback_set_error(const char* message) {
  try {
    acc::capi::callback_error() = message ? message : "";
  } catch (...) {
  }
}

}  // extern "C"

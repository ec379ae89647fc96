// Library information, errors, strings, options and seeding.

#include <cstdlib>

#include "accelerator/option_schemas.h"
#include "common/build_info.h"
#include "common/device.h"
#include "common/random.h"
#include "common/version.h"
#include "state/process_env.h"
#include "guard.h"
#include "handles.h"

using namespace acc::capi;

static_assert(ACC_VERSION_MAJOR == acc::kVersionMajor && ACC_VERSION_MINOR == acc::kVersionMinor &&
                  ACC_VERSION_PATCH == acc::kVersionPatch && ACC_ABI_VERSION == acc::kAbiVersion,
              "accelerate.h and common/version.h disagree");
static_assert(ACC_ERR_INTERNAL == static_cast<int>(acc::Status::Internal), "status codes disagree");

extern "C" {

void acc_version(int* major, int* minor, int* patch) {
  if (major) *major = acc::kVersionMajor;
  if (minor) *minor = acc::kVersionMinor;
  if (patch) *patch = acc::kVersionPatch;
}

int acc_abi_version(void) { return acc::kAbiVersion; }

acc_status acc_check_abi(int expected) {
  return guarded([&] {
    if (expected != acc::kAbiVersion)
      acc::fail(acc::Status::VersionMismatch, "the caller was built for accelerate ABI version ", expected,
                " but the loaded libaccelerate (", acc::kVersionString, ") has ABI version ", acc::kAbiVersion);
  });
}

const char* acc_build_info(void) {
  static const std::string info = [] {
    try {
      return acc::build_info_json();
    } catch (...) {
      return std::string("{}");
    }
  }();
  return info.c_str();
}

const char* acc_last_error_message(void) { return last_message().c_str(); }
acc_status acc_last_error_code(void) { return last_status(); }
const char* acc_last_error_backtrace(void) { return last_backtrace().c_str(); }

const char* acc_status_name(acc_status status) {
  switch (enum_int(status)) {
    case ACC_OK: return "ACC_OK";
    case ACC_ERR_INVALID_ARGUMENT: return "ACC_ERR_INVALID_ARGUMENT";
    case ACC_ERR_INVALID_HANDLE: return "ACC_ERR_INVALID_HANDLE";
    case ACC_ERR_NOT_INITIALIZED: return "ACC_ERR_NOT_INITIALIZED";
    case ACC_ERR_UNSUPPORTED: return "ACC_ERR_UNSUPPORTED";
    case ACC_ERR_OUT_OF_MEMORY: return "ACC_ERR_OUT_OF_MEMORY";
    case ACC_ERR_TIMEOUT: return "ACC_ERR_TIMEOUT";
    case ACC_ERR_ABORTED: return "ACC_ERR_ABORTED";
    case ACC_ERR_DISTRIBUTED: return "ACC_ERR_DISTRIBUTED";
    case ACC_ERR_IO: return "ACC_ERR_IO";
    case ACC_ERR_VERSION_MISMATCH: return "ACC_ERR_VERSION_MISMATCH";
    case ACC_ERR_INTERNAL: return "ACC_ERR_INTERNAL";
    case ACC_STATUS_MAX_ENUM: break;
  }
  return "unknown status";
}

void acc_string_free(char* str) { release_owned_string(str); }

int64_t acc_debug_live_handles(acc_handle_kind kind) { return live_handles(enum_int(kind)); }

acc_status acc_set_seed(uint64_t seed) {
  return guarded([&] { acc::set_seed(seed); });
}

acc_status acc_set_seed_with(uint64_t seed, uint32_t flags) {
  return guarded([&] {
    const uint32_t known = ACC_SEED_DEVICE_SPECIFIC | ACC_SEED_DETERMINISTIC;
    acc::require((flags & ~known) == 0, "unknown acc_set_seed_with flags ", flags & ~known, " (ACC_SEED_*)");
    const bool device_specific = (flags & ACC_SEED_DEVICE_SPECIFIC) != 0;
    // Accelerate takes the index from the process's state, which the launcher's variables set.
    const int64_t index = device_specific ? acc::detect_process_env().rank : 0;
    acc::set_seed(seed, device_specific, index, (flags & ACC_SEED_DETERMINISTIC) != 0);
  });
}

acc_status acc_random_get_state(acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::global_random_state());
  });
}

acc_status acc_random_set_state(const acc_tensor* state) {
  return guarded([&] { acc::set_global_random_state(live(state, "state").tensor); });
}

acc_status acc_string_list_size(const acc_string_list* list, size_t* out) {
  return guarded([&] { *out_param(out, "out") = live(list, "list").items.size(); });
}

acc_status acc_string_list_get(const acc_string_list* list, size_t index, const char** out) {
  return guarded([&] {
    const auto& items = live(list, "list").items;
    acc::require(index < items.size(), "index ", index, " is out of range (the list has ", items.size(), " items)");
    *out_param(out, "out") = items[index].c_str();
  });
}

acc_status acc_string_list_get_bytes(const acc_string_list* list, size_t index, const void** data, size_t* size) {
  return guarded([&] {
    const auto& items = live(list, "list").items;
    acc::require(index < items.size(), "index ", index, " is out of range (the list has ", items.size(), " items)");
    out_param(data, "data");
    out_param(size, "size");
    *data = items[index].data();
    *size = items[index].size();
  });
}

void acc_string_list_free(acc_string_list* list) { release(list); }

acc_status acc_options_create(acc_options_kind kind, acc_options** out) {
  return guarded([&] {
    out_param(out, "out");
    // (An enum class over int holds any int: an unknown kind fails in option_schema.)
    emit(out, acc::Options(acc::option_schema(static_cast<acc::OptionsKind>(enum_int(kind)))));
  });
}

acc_status acc_options_set_int(acc_options* opts, const char* key, int64_t value) {
  return guarded([&] { live(opts, "opts").options.set(text_arg(key, "key"), value); });
}

acc_status acc_options_set_double(acc_options* opts, const char* key, double value) {
  return guarded([&] { live(opts, "opts").options.set(text_arg(key, "key"), value); });
}

acc_status acc_options_set_bool(acc_options* opts, const char* key, int value) {
  return guarded([&] { live(opts, "opts").options.set(text_arg(key, "key"), value != 0); });
}

acc_status acc_options_set_string(acc_options* opts, const char* key, const char* value) {
  return guarded(
      [&] { live(opts, "opts").options.set(text_arg(key, "key"), acc::OptionValue(text_arg(value, "value"))); });
}

acc_status acc_options_set(acc_options* opts, const char* key, const char* value) {
  return guarded([&] { live(opts, "opts").options.set_from_text(text_arg(key, "key"), text_arg(value, "value")); });
}

acc_status acc_options_get(const acc_options* opts, const char* key, char** out) {
  return guarded([&] {
    std::string text = live(opts, "opts").options.get_text(text_arg(key, "key"));
    *out_param(out, "out") = owned_string(text);
  });
}

void acc_options_free(acc_options* opts) { release(opts); }

}  // extern "C"

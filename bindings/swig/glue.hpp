// C++ glue compiled into each language's wrapper library (never into libaccelerate): turns failed
// statuses into a C++ exception that the per-language %exception maps, and adapts the C API's
// callbacks to SWIG director classes, which the host languages subclass.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "accelerate.h"
#include "swig/directors.hpp"

namespace accswig {

// A failed acc_* call: status and message, read right after the failure on the same thread.
struct Error {
  acc_status code;
  std::string message;
};

inline void check(acc_status status) {
  if (status != ACC_OK) throw Error{status, acc_last_error_message()};
}

inline void fail(acc_status status, const std::string& message) { throw Error{status, message}; }

// What a closed proxy's method says: Java's and C#'s proxies pass a null handle once closed, which the
// library would report as a NULL argument ("t is NULL"); the wrapper names the closed object instead.
inline std::string closed_object_message(const char* c_type, const char* closed) {
  static const std::pair<const char*, const char*> names[] = {
      {"acc_tensor", "Tensor"},         {"acc_tensor_list", "TensorList"}, {"acc_string_list", "StringList"},
      {"acc_options", "Options"},       {"acc_model", "Model"},            {"acc_optimizer", "Optimizer"},
      {"acc_scheduler", "Scheduler"},   {"acc_averaged_model", "AveragedModel"}, {"acc_dataset", "Dataset"},
      {"acc_dataloader", "DataLoader"}, {"acc_accelerator", "Accelerator"}, {"acc_progress", "Progress"},
      {"accswig::LoadReport", "LoadReport"}};
  for (const auto& [c_name, proxy] : names)
    if (std::strcmp(c_name, c_type) == 0) return std::string("this ") + proxy + " is " + closed;
  return std::string("this object (") + c_type + ") is " + closed;
}

// The C type of a method's closed (null) receiver, noted by Java's and C#'s `check` typemap for the
// same wrapper call. The method still runs, so that a callback object passed to it is released as on
// any failure; its error is then named by the closed object (error_message).
inline const char*& closed_receiver() {
  thread_local const char* type = nullptr;
  return type;
}
inline void note_receiver(const void* self, const char* c_type) { closed_receiver() = self ? nullptr : c_type; }
// The message of a failed wrapper call (and the receiver note cleared).
inline std::string error_message(const Error& e, const char* closed) {
  const char* type = closed_receiver();
  closed_receiver() = nullptr;
  return type && e.code == ACC_ERR_INVALID_HANDLE ? closed_object_message(type, closed) : e.message;
}

// Go has no pending-exception slot: the %exception handler parks the error here and the hidden
// error argument of the same wrapper call takes it, so no goroutine can see another's error.
inline std::string& go_pending_error() {
  thread_local std::string pending;
  return pending;
}
inline std::string take_go_error() {
  std::string e;
  e.swap(go_pending_error());
  return e;
}
inline void park_go_error(acc_status code, const std::string& message) {
  go_pending_error() = std::to_string(static_cast<int>(code)) + ":" + message;
}

// Set by Go's string argument typemap when a string holds a NUL; the same wrapper call refuses it
// (a typemap cannot return an error itself).
inline bool& go_string_held_nul() {
  thread_local bool held = false;
  return held;
}
inline void require_no_go_nul() {
  if (!go_string_held_nul()) return;
  go_string_held_nul() = false;
  fail(ACC_ERR_INVALID_ARGUMENT, "a string holds a NUL character (\\0), which the library cannot take");
}

// Splits names each followed by a NUL (how metric names cross: a name may hold any other character,
// a newline or nothing at all). Bytes after the last NUL are refused: the list was cut short.
inline std::vector<std::string> split_nul_terminated(const uint8_t* bytes, size_t size) {
  std::vector<std::string> out;
  const char* text = reinterpret_cast<const char*>(bytes);
  size_t start = 0;
  for (size_t i = 0; i < size; ++i)
    if (text[i] == '\0') {
      out.emplace_back(text + start, i - start);
      start = i + 1;
    }
  if (start != size) fail(ACC_ERR_INVALID_ARGUMENT, "names: the last name is not followed by its NUL");
  return out;
}

// Owns the tensors of a list for the length of a call (forward inputs, dataset fields).
struct ListTensors {
  std::vector<acc_tensor*> tensors;
  explicit ListTensors(const acc_tensor_list* list) {
    size_t n = 0;
    check(acc_tensor_list_size(list, &n));
    for (size_t i = 0; i < n; ++i) {
      acc_tensor* t = nullptr;
      check(acc_tensor_list_get(list, i, &t));
      tensors.push_back(t);
    }
  }
  ~ListTensors() {
    for (acc_tensor* t : tensors) acc_tensor_free(t);
  }
  ListTensors(const ListTensors&) = delete;
  ListTensors& operator=(const ListTensors&) = delete;
  const acc_tensor* const* data() const { return tensors.data(); }
  size_t size() const { return tensors.size(); }
};

// Runs a host callback that returns a status; a C++ exception (e.g. Java's director exception)
// becomes a failure with its text.
template <typename Call>
int guarded(Call call, int failure = 1) {
  try {
    return call();
  } catch (const std::exception& e) {
    acc_callback_set_error(e.what());
  } catch (...) {
    acc_callback_set_error("unknown exception in a callback");
  }
  return failure;
}

// The callbacks the library holds, each released once, through free_callback, by the library: when
// what holds it is gone, or when its registration fails (accelerate.h's rule for user data).
class Registry {
 public:
  static Registry& get() {
    static Registry* r = new Registry;  // never destroyed: callbacks may run during exit
    return *r;
  }
  void add(Callback* cb) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(cb);
  }
  // Drops `cb` if it is still held; true when this call dropped it.
  bool drop(Callback* cb) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (live_.erase(cb) == 0) return false;
    }
    try {
      cb->released();
    } catch (...) {
    }
    delete cb;
    return true;
  }

 private:
  std::mutex mu_;
  std::unordered_set<Callback*> live_;
};

inline void free_callback(void* user_data) { Registry::get().drop(static_cast<Callback*>(user_data)); }

// Registers `cb` with the library through `reg`, which receives the user_data and free function.
template <typename Register>
void register_callback(Callback* cb, Register reg) {
  if (!cb) fail(ACC_ERR_INVALID_ARGUMENT, "callback object is null");
  Registry::get().add(cb);
  // On failure the library has already released `cb` (dropping it again here could drop another
  // callback made at the same address since).
  const acc_status status = reg(static_cast<void*>(cb), &free_callback);
  if (status != ACC_OK) throw Error{status, acc_last_error_message()};
}

// Runs a host callback that fills a new list; hands the list to the library on success.
template <typename Call>
int fill_list(acc_tensor_list** out, Call call) {
  *out = nullptr;
  acc_tensor_list* list = nullptr;
  if (acc_tensor_list_create(&list) != ACC_OK) {
    acc_callback_set_error(acc_last_error_message());
    return 1;
  }
  const int code = guarded([&] { return call(list); });  // e.g. a Java director exception
  if (code != 0) {
    acc_tensor_list_free(list);
    return code;
  }
  *out = list;
  return 0;
}

inline int sample_trampoline(void* user_data, int64_t index, acc_tensor_list** out) {
  auto* src = static_cast<SampleSource*>(user_data);
  return fill_list(out, [&](acc_tensor_list* list) { return src->sample(index, list); });
}

inline int next_trampoline(void* user_data, acc_tensor_list** out) {
  auto* src = static_cast<StreamSource*>(user_data);
  const int code = fill_list(out, [&](acc_tensor_list* list) { return src->next(list); });
  size_t n = 0;
  if (code == 0 && acc_tensor_list_size(*out, &n) == ACC_OK && n == 0) {  // end of the stream
    acc_tensor_list_free(*out);
    *out = nullptr;
  }
  return code;
}

inline int start_trampoline(void* user_data, int64_t epoch) {
  return guarded([&] { return static_cast<StreamSource*>(user_data)->start(epoch); });
}

}  // namespace accswig

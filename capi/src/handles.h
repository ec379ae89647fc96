// The structs behind the opaque handles of accelerate.h, and the registry that tells a live handle
// from a NULL, released or foreign pointer.
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate.h"
#include "common/error.h"
#include "accelerator/accelerator.h"
#include "common/options.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/iterable.h"
#include "model/model.h"
#include "optim/averaged_model.h"
#include "optim/optimizer.h"
#include "schedule/scheduler.h"
#include "tensor/losses.h"
#include "tracking/progress.h"

struct acc_tensor {
  at::Tensor tensor;
};
struct acc_tensor_list {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};
struct acc_string_list {
  std::vector<std::string> items;
};
struct acc_options {
  acc::Options options;
};
struct acc_model {
  std::shared_ptr<acc::Model> model;
};
struct acc_optimizer {
  std::shared_ptr<acc::Optimizer> optimizer;
};
struct acc_scheduler {
  std::shared_ptr<acc::Scheduler> scheduler;
};
struct acc_dataset {
  std::shared_ptr<acc::Dataset> dataset;         // map-style; null for a stream
  std::shared_ptr<acc::IterableSource> stream;  // iterable; null for a map-style dataset
};
struct acc_dataloader {
  std::shared_ptr<acc::DataLoader> loader;
};
struct acc_accelerator {
  std::shared_ptr<acc::Accelerator> accelerator;
};
struct acc_progress {
  std::unique_ptr<acc::tracking::Progress> progress;
};
struct acc_averaged_model {
  std::shared_ptr<acc::AveragedModel> averaged;
};
// The sink a state-saving callback writes into (a handle live during that callback only).
struct acc_bytes {
  std::string data;
};
// The models a checkpoint pre-hook gets (a handle live during that hook only).
struct acc_checkpoint_models {
  acc::CheckpointModels* models;
};

namespace acc::capi {

template <typename T> struct HandleTraits;
#define ACC_HANDLE_TRAITS(type, kind)                  \
  template <> struct HandleTraits<type> {              \
    static constexpr acc_handle_kind value = kind;     \
    static constexpr const char* name = #type;         \
  };
ACC_HANDLE_TRAITS(acc_tensor, ACC_HANDLE_TENSOR)
ACC_HANDLE_TRAITS(acc_tensor_list, ACC_HANDLE_TENSOR_LIST)
ACC_HANDLE_TRAITS(acc_string_list, ACC_HANDLE_STRING_LIST)
ACC_HANDLE_TRAITS(acc_options, ACC_HANDLE_OPTIONS)
ACC_HANDLE_TRAITS(acc_model, ACC_HANDLE_MODEL)
ACC_HANDLE_TRAITS(acc_optimizer, ACC_HANDLE_OPTIMIZER)
ACC_HANDLE_TRAITS(acc_scheduler, ACC_HANDLE_SCHEDULER)
ACC_HANDLE_TRAITS(acc_dataset, ACC_HANDLE_DATASET)
ACC_HANDLE_TRAITS(acc_dataloader, ACC_HANDLE_DATALOADER)
ACC_HANDLE_TRAITS(acc_accelerator, ACC_HANDLE_ACCELERATOR)
ACC_HANDLE_TRAITS(acc_progress, ACC_HANDLE_PROGRESS)
ACC_HANDLE_TRAITS(acc_bytes, ACC_HANDLE_BYTES)
ACC_HANDLE_TRAITS(acc_averaged_model, ACC_HANDLE_AVERAGED_MODEL)
ACC_HANDLE_TRAITS(acc_checkpoint_models, ACC_HANDLE_CHECKPOINT_MODELS)
#undef ACC_HANDLE_TRAITS

// The registry of live handles (thread-safe). A handle is a value the registry hands out once, never
// the address of its object: no later handle ever has a freed one's value, so a released handle
// stays invalid for good (a new object at a freed one's address would otherwise be taken for it,
// and a second free would release it), and making and freeing handles costs no lasting memory or
// address space. The values lie where no memory can be (non-canonical addresses), so a handle is
// never mistaken for a pointer by anyone (a Go garbage collector, a debugger) and never points into
// memory.
// Registers `object`, destroyed by `destroy(object)` when its handle is freed; returns its handle.
const void* register_handle(void* object, acc_handle_kind kind, void (*destroy)(void*));
// Ends a live handle of that kind: it is no longer live, and its object is destroyed now, or when
// the last C call using it returns (PinScope). Returns false when `handle` is not live with that
// kind (then nothing is changed).
bool unregister_handle(const void* handle, acc_handle_kind kind);
// The object of a live handle of that kind (null if it is not one), not pinned: for the library's
// own use of a handle it made (a callback's result, a sink), outside the caller's arguments.
void* object_if_live(const void* handle, acc_handle_kind kind);
// The object of a live handle of that kind (null if it is not one); inside a C call (PinScope) the
// handle is kept from destruction until the call returns.
void* pin_if_live(const void* handle, acc_handle_kind kind);
// `kind`: an acc_handle_kind as the caller passed it (enum_int).
int64_t live_handles(int kind);

// A C enum argument as the int its caller passed. C lets any int through an enum parameter, and one
// outside the C++ enum's range (a value with the sign bit set) is undefined to read as the enum: the
// argument is taken by reference and its bytes read as an int, never loaded as the enum.
template <typename Enum>
int enum_int(const Enum& argument) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(int), "C enums are int-sized");
  int value;
  std::memcpy(&value, &argument, sizeof value);
  return value;
}

// Makes an object, registers it and writes its handle to *out.
template <typename T, typename... Args>
void emit(T** out, Args&&... args) {
  std::unique_ptr<T> object(new T{std::forward<Args>(args)...});
  const void* handle =
      register_handle(object.get(), HandleTraits<T>::value, [](void* o) { delete static_cast<T*>(o); });
  object.release();
  *out = static_cast<T*>(const_cast<void*>(handle));
}

// A map-style dataset handle (no stream).
inline void emit_dataset(acc_dataset** out, std::shared_ptr<acc::Dataset> dataset) {
  emit(out, std::move(dataset), std::shared_ptr<acc::IterableSource>());
}

// The handle's object, or an InvalidHandle error naming the argument.
template <typename T>
T& live(T* handle, const char* argument) {
  if (!handle) fail(Status::InvalidHandle, argument, " is NULL");
  using Traits = HandleTraits<std::remove_const_t<T>>;
  void* object = pin_if_live(handle, Traits::value);
  if (!object)
    fail(Status::InvalidHandle, argument, " is not a live ", Traits::name,
         " (already freed, or a handle of another type)");
  return *static_cast<T*>(object);
}

// live() for element `index` of the array argument `array`: its name is spelled out for the error only
// (arrays of tensors are checked on every forward).
template <typename T>
T& live_element(T* handle, const std::string& array, size_t index) {
  if (handle)
    if (void* object = pin_if_live(handle, HandleTraits<std::remove_const_t<T>>::value))
      return *static_cast<T*>(object);
  return live(handle, (array + "[" + std::to_string(index) + "]").c_str());  // throws, naming the element
}

// Frees a handle; NULL is a no-op, a value that is not a live handle is ignored (never freed twice).
template <typename T>
void release(T* handle) {
  if (handle) unregister_handle(handle, HandleTraits<T>::value);
}

template <typename T>
T* out_param(T* out, const char* argument) {
  if (!out) fail(Status::InvalidArgument, argument, " (the out-parameter) is NULL");
  return out;
}

inline std::string text_arg(const char* text, const char* argument) {
  if (!text) fail(Status::InvalidArgument, argument, " is NULL");
  return text;
}

// A file or folder path: neither NULL nor empty (the system would take "" as no file, or as
// the working folder once a suffix is added).
inline std::string path_arg(const char* text, const char* argument) {
  std::string path = text_arg(text, argument);
  if (path.empty()) fail(Status::InvalidArgument, argument, " is empty");
  return path;
}

// The accelerator behind a handle argument named "acc".
inline acc::Accelerator& accelerator_arg(const acc_accelerator* a) { return *live(a, "acc").accelerator; }

acc::Reduction reduction_arg(const acc_reduction& r);
// A C tristate: -1 not set, 0 or 1 false or true; anything else is an error naming `what`.
std::optional<bool> tristate_arg(int value, const char* what);

// An array argument of n tensor handles named `array` ("inputs": errors say "inputs is NULL but n is 2",
// "inputs[i] is not a live acc_tensor").
std::vector<at::Tensor> tensors_arg(const acc_tensor* const* tensors, size_t n, const std::string& array);
// An array argument of n strings ("names is NULL but n is 2", "names[1] is NULL").
std::vector<std::string> names_arg(const char* const* names, size_t n, const std::string& array);

// A tensor list as named tensors (unnamed ones have "").
acc::NamedTensors named_tensors(const acc_tensor_list& list);
// A new tensor list handle holding `named`, written to *out.
void emit_named(acc_tensor_list** out, const acc::NamedTensors& named);

// The options passed to a function that takes options of `kind` (NULL: all defaults).
acc::Options options_arg(const acc_options* opts, acc::OptionsKind kind);

// A malloc'd copy for char** out-parameters (freed by acc_string_free), registered as handed out.
char* owned_string(const std::string& text);
// Frees a string owned_string handed out; any other pointer (NULL, foreign, already freed) is ignored.
void release_owned_string(char* text);

at::ScalarType to_scalar_type(const acc_dtype& dtype);
acc_dtype from_scalar_type(at::ScalarType type);

}  // namespace acc::capi

#include "handles.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <numeric>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "accelerator/option_schemas.h"
#include "common/thread_state.h"
#include "guard.h"

namespace acc::capi {
namespace {

// Handle values: 16 apart (aligned as an object would be), from 2^62 up. Every one has bit 62 set and
// bit 63 clear, which no user or kernel address has (x86-64 and AArch64 with 48- to 57-bit
// addresses): 2^58 handles, a thousand years at ten million a second.
constexpr uintptr_t kFirstHandle = uintptr_t{1} << 62, kHandleStride = 16;
constexpr uintptr_t kLastHandle = (uintptr_t{1} << 63) - kHandleStride;
static_assert(sizeof(uintptr_t) == 8, "handle values need 64-bit pointers");

struct Entry {
  acc_handle_kind kind;
  void* object;
  void (*destroy)(void*);
  int64_t pins = 0;    // C calls now using the handle (PinScope)
  bool freed = false;  // freed while pinned: destroyed at the last unpin
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const void*, Entry> kinds;  // live handles, and freed ones still pinned
  std::unordered_set<const void*> strings;  // handed out by owned_string, not yet freed
  std::array<int64_t, 16> counts{};
  uintptr_t next_handle = kFirstHandle;
};

Registry* registry_instance() {
  static auto* instance = new Registry();  // never destroyed: handles may be freed during exit
  return instance;
}

Registry& registry() {
  // A child forked while another thread holds the registry would find it locked for good, and hang
  // on its first handle: fork waits for it, and both sides let it go after.
  static const bool forks_safely =
      ::pthread_atfork([] { registry_instance()->mutex.lock(); }, [] { registry_instance()->mutex.unlock(); },
                       [] { registry_instance()->mutex.unlock(); }) == 0;
  static_cast<void>(forks_safely);
  return *registry_instance();
}

// The handles this thread's C calls pinned, innermost call last (a callback may call in again), and
// how many C calls are running on this thread.
struct PinnedTag;
std::vector<const void*>& pinned() { return thread_state<std::vector<const void*>, PinnedTag>(); }
thread_local int t_calls = 0;

// The entry of a live handle of that kind (not freed), or null.
Entry* live_entry(Registry& r, const void* handle, acc_handle_kind kind) {
  auto it = r.kinds.find(handle);
  if (it == r.kinds.end() || it->second.kind != kind || it->second.freed) return nullptr;
  return &it->second;
}

}  // namespace

PinScope::PinScope() noexcept : mark_(pinned().size()) { ++t_calls; }

PinScope::~PinScope() {
  --t_calls;
  std::vector<const void*>& pins = pinned();
  if (pins.size() == mark_) return;
  // One lock for the call's pins; the objects of handles freed meanwhile are destroyed after it,
  // since a destructor may free other handles.
  std::vector<std::pair<void*, void (*)(void*)>> doomed;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (size_t i = pins.size(); i-- > mark_;) {
      auto it = r.kinds.find(pins[i]);
      if (it == r.kinds.end() || --it->second.pins > 0 || !it->second.freed) continue;
      doomed.emplace_back(it->second.object, it->second.destroy);
      r.kinds.erase(it);
    }
    pins.resize(mark_);
  }
  for (const auto& [object, destroy] : doomed) destroy(object);
}

const void* register_handle(void* object, acc_handle_kind kind, void (*destroy)(void*)) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.next_handle > kLastHandle) throw std::bad_alloc();  // (not in this millennium)
  const auto* handle = reinterpret_cast<const void*>(r.next_handle);
  r.kinds.emplace(handle, Entry{kind, object, destroy});
  r.next_handle += kHandleStride;
  ++r.counts[kind];
  return handle;
}

bool unregister_handle(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  Entry gone{};
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    Entry* entry = live_entry(r, handle, kind);
    if (!entry) return false;
    --r.counts[kind];
    if (entry->pins > 0) {  // a call is using it: the last one to return destroys it
      entry->freed = true;
      return true;
    }
    gone = *entry;
    r.kinds.erase(handle);
  }
  gone.destroy(gone.object);
  return true;
}

void* object_if_live(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const Entry* entry = live_entry(r, handle, kind);
  return entry ? entry->object : nullptr;
}

void* pin_if_live(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Entry* entry = live_entry(r, handle, kind);
  if (!entry) return nullptr;
  if (t_calls > 0) {
    ++entry->pins;
    pinned().push_back(handle);
  }
  return entry->object;
}

int64_t live_handles(int kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (kind == ACC_HANDLE_ANY) return std::accumulate(r.counts.begin(), r.counts.end(), int64_t{0});
  if (kind < 0 || static_cast<size_t>(kind) >= r.counts.size()) return 0;
  return r.counts[kind];
}

acc::Options options_arg(const acc_options* opts, acc::OptionsKind kind) {
  if (!opts) return acc::Options(acc::option_schema(kind));
  const acc::Options& o = live(opts, "opts").options;
  acc::require(o.kind() == kind, "opts were created for ", acc::options_kind_name(o.kind()), " options, but ",
               acc::options_kind_name(kind), " options are needed here");
  return o;
}

char* owned_string(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, text.c_str(), text.size() + 1);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.strings.insert(copy);
  return copy;
}

void release_owned_string(char* text) {
  auto& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.strings.erase(text) == 0) return;
  }
  std::free(text);
}

at::ScalarType to_scalar_type(const acc_dtype& dtype) {
  switch (enum_int(dtype)) {
    case ACC_DTYPE_FLOAT32: return at::kFloat;
    case ACC_DTYPE_FLOAT64: return at::kDouble;
    case ACC_DTYPE_BFLOAT16: return at::kBFloat16;
    case ACC_DTYPE_FLOAT16: return at::kHalf;
    case ACC_DTYPE_INT64: return at::kLong;
    case ACC_DTYPE_INT32: return at::kInt;
    case ACC_DTYPE_UINT8: return at::kByte;
    case ACC_DTYPE_BOOL: return at::kBool;
    case ACC_DTYPE_INT8: return at::kChar;
    case ACC_DTYPE_INT16: return at::kShort;
    case ACC_DTYPE_UNDEFINED:
    case ACC_DTYPE_MAX_ENUM: break;
  }
  fail(Status::InvalidArgument, "invalid dtype ", enum_int(dtype));
}

acc_dtype from_scalar_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ACC_DTYPE_FLOAT32;
    case at::kDouble: return ACC_DTYPE_FLOAT64;
    case at::kBFloat16: return ACC_DTYPE_BFLOAT16;
    case at::kHalf: return ACC_DTYPE_FLOAT16;
    case at::kLong: return ACC_DTYPE_INT64;
    case at::kInt: return ACC_DTYPE_INT32;
    case at::kByte: return ACC_DTYPE_UINT8;
    case at::kBool: return ACC_DTYPE_BOOL;
    case at::kChar: return ACC_DTYPE_INT8;
    case at::kShort: return ACC_DTYPE_INT16;
    default: break;
  }
  fail(Status::Unsupported, "the tensor's dtype ", type, " has no acc_dtype");
}

std::optional<bool> tristate_arg(int value, const char* what) {
  acc::require(value >= -1 && value <= 1, what, " must be -1, 0 or 1, got ", value);
  if (value < 0) return std::nullopt;
  return value == 1;
}

acc::Reduction reduction_arg(const acc_reduction& r) {
  const int value = enum_int(r);
  require(value == ACC_REDUCTION_NONE || value == ACC_REDUCTION_MEAN || value == ACC_REDUCTION_SUM,
          "invalid reduction ", value);
  return static_cast<acc::Reduction>(value);
}

std::vector<at::Tensor> tensors_arg(const acc_tensor* const* tensors, size_t n, const std::string& array) {
  require(tensors || n == 0, array, " is NULL but n is ", n);
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(live_element(tensors[i], array, i).tensor);
  return out;
}

std::vector<std::string> names_arg(const char* const* names, size_t n, const std::string& array) {
  require(names || n == 0, array, " is NULL but n is ", n);
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    require(names[i] != nullptr, array, "[", i, "] is NULL");
    out.emplace_back(names[i]);
  }
  return out;
}

acc::NamedTensors named_tensors(const acc_tensor_list& list) {
  acc::NamedTensors out;
  for (size_t i = 0; i < list.tensors.size(); ++i) out.emplace_back(list.names[i], list.tensors[i]);
  return out;
}

void emit_named(acc_tensor_list** out, const acc::NamedTensors& named) {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  names.reserve(named.size());
  tensors.reserve(named.size());
  for (const auto& entry : named) {
    names.push_back(entry.first);
    tensors.push_back(entry.second);
  }
  emit(out, std::move(names), std::move(tensors));
}

}  // namespace acc::capi

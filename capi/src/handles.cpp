#include "handles.h"

#include <pthread.h>
#include <sys/mman.h>
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

// Handle cells come from address space reserved in chunks and handed out once, in order. Memory is
// committed only where cells are touched, and pages whose cells are all retired are given back to
// the kernel (their addresses stay reserved, never reused): a long run that creates and frees
// millions of handles holds only the pages of its live ones, and up to kPagesKept retired ones.
// They go back in batches, mostly contiguous (cells are handed out in order), with one madvise per
// run of pages: each call costs a system call and, in a process with threads, a TLB shootdown on
// every CPU running them (a page at a time, that was ~4% of a small model's training step).
// Chunks start at 1 MiB (8192 cells) and double up to 1 GiB, so that a program under an
// address-space limit (`ulimit -v`) reserves for its handles about twice what they have used.
class CellArena {
 public:
  void* allocate() {
    if (next_ == end_) map_chunk();
    void* cell = next_;
    next_ += kHandleCellSize;
    return cell;
  }
  void retire(void* cell) {
    const auto page = reinterpret_cast<uintptr_t>(cell) & ~(page_size_ - 1);
    if (++retired_[page] < page_size_ / kHandleCellSize) return;
    retired_.erase(page);
    emptied_.push_back(page);
    if (emptied_.size() >= kPagesKept) give_back_emptied();
  }

 private:
  static constexpr size_t kFirstChunk = size_t{1} << 20, kLargestChunk = size_t{1} << 30;
  static constexpr size_t kPagesKept = 64;
  void give_back_emptied() {
    std::sort(emptied_.begin(), emptied_.end());
    for (size_t first = 0, last = 0; first < emptied_.size(); first = last) {
      for (last = first + 1; last < emptied_.size() && emptied_[last] == emptied_[last - 1] + page_size_;) ++last;
      ::madvise(reinterpret_cast<void*>(emptied_[first]), (last - first) * page_size_, MADV_DONTNEED);
    }
    emptied_.clear();
  }
  void map_chunk() {
    void* chunk = ::mmap(nullptr, chunk_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (chunk == MAP_FAILED) throw std::bad_alloc();
    next_ = static_cast<char*>(chunk);
    end_ = next_ + chunk_;
    chunk_ = std::min(chunk_ * 2, kLargestChunk);
  }
  size_t chunk_ = kFirstChunk;
  const uintptr_t page_size_ = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  char* next_ = nullptr;
  char* end_ = nullptr;
  std::unordered_map<uintptr_t, size_t> retired_;  // cells retired per page not yet given back
  std::vector<uintptr_t> emptied_;                 // pages all of whose cells are retired, not given back yet
};

struct Entry {
  acc_handle_kind kind;
  int64_t pins = 0;                  // C calls now using the handle (PinScope)
  void (*destroy)(void*) = nullptr;  // set once freed while pinned: runs at the last unpin
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const void*, Entry> kinds;  // live handles, and freed ones still pinned
  std::unordered_set<const void*> strings;  // handed out by owned_string, not yet freed
  std::array<int64_t, 16> counts{};
  CellArena cells;
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
  if (it == r.kinds.end() || it->second.kind != kind || it->second.destroy) return nullptr;
  return &it->second;
}

}  // namespace

void* allocate_handle_cell() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.cells.allocate();
}

void retire_handle_cell(void* cell) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.cells.retire(cell);
}

PinScope::PinScope() noexcept : mark_(pinned().size()) { ++t_calls; }

PinScope::~PinScope() {
  --t_calls;
  std::vector<const void*>& pins = pinned();
  if (pins.size() == mark_) return;
  // One lock for the call's pins; the handles freed meanwhile are destroyed after it, since a
  // destructor may free other handles.
  std::vector<std::pair<const void*, void (*)(void*)>> doomed;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (size_t i = pins.size(); i-- > mark_;) {
      auto it = r.kinds.find(pins[i]);
      if (it == r.kinds.end() || --it->second.pins > 0 || !it->second.destroy) continue;
      doomed.emplace_back(it->first, it->second.destroy);
      r.kinds.erase(it);
    }
    pins.resize(mark_);
  }
  for (const auto& [handle, destroy] : doomed) destroy(const_cast<void*>(handle));
}

void register_handle(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.kinds[handle] = Entry{kind};
  ++r.counts[kind];
}

bool unregister_handle(const void* handle, acc_handle_kind kind, void (*destroy)(void*)) {
  auto& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    Entry* entry = live_entry(r, handle, kind);
    if (!entry) return false;
    --r.counts[kind];
    if (entry->pins > 0) {  // a call is using it: the last one to return destroys it
      entry->destroy = destroy;
      return true;
    }
    r.kinds.erase(handle);
  }
  destroy(const_cast<void*>(handle));
  return true;
}

bool is_live(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return live_entry(r, handle, kind) != nullptr;
}

bool pin_if_live(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Entry* entry = live_entry(r, handle, kind);
  if (!entry) return false;
  if (t_calls > 0) {
    ++entry->pins;
    pinned().push_back(handle);
  }
  return true;
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

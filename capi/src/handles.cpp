#include "handles.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace acc::capi {
namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<const void*, acc_handle_kind> kinds;
  std::array<int64_t, 16> counts{};
};

Registry& registry() {
  static auto* instance = new Registry();  // never destroyed: handles may be freed during exit
  return *instance;
}

}  // namespace

void register_handle(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.kinds[handle] = kind;
  ++r.counts[kind];
}

bool unregister_handle(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.kinds.find(handle);
  if (it == r.kinds.end() || it->second != kind) return false;
  r.kinds.erase(it);
  --r.counts[kind];
  return true;
}

bool is_live(const void* handle, acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.kinds.find(handle);
  return it != r.kinds.end() && it->second == kind;
}

int64_t live_handles(acc_handle_kind kind) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (kind == ACC_HANDLE_ANY) return static_cast<int64_t>(r.kinds.size());
  if (kind < 0 || static_cast<size_t>(kind) >= r.counts.size()) return 0;
  return r.counts[kind];
}

acc::Options options_arg(const acc_options* opts, acc::OptionsKind kind) {
  if (!opts) return acc::Options(kind);
  const acc::Options& o = live(opts, "opts").options;
  acc::require(o.kind() == kind, "opts were created for ", acc::options_kind_name(o.kind()), " options, but ",
               acc::options_kind_name(kind), " options are needed here");
  return o;
}

char* owned_string(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

at::ScalarType to_scalar_type(acc_dtype dtype) {
  switch (dtype) {
    case ACC_DTYPE_FLOAT32: return at::kFloat;
    case ACC_DTYPE_FLOAT64: return at::kDouble;
    case ACC_DTYPE_BFLOAT16: return at::kBFloat16;
    case ACC_DTYPE_FLOAT16: return at::kHalf;
    case ACC_DTYPE_INT64: return at::kLong;
    case ACC_DTYPE_INT32: return at::kInt;
    case ACC_DTYPE_UINT8: return at::kByte;
    case ACC_DTYPE_BOOL: return at::kBool;
    case ACC_DTYPE_UNDEFINED:
    case ACC_DTYPE_MAX_ENUM: break;
  }
  fail(Status::InvalidArgument, "invalid dtype ", static_cast<int>(dtype));
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
    default: break;
  }
  fail(Status::Unsupported, "the tensor's dtype ", type, " has no acc_dtype");
}

acc::Reduction reduction_arg(acc_reduction r) {
  require(r == ACC_REDUCTION_NONE || r == ACC_REDUCTION_MEAN || r == ACC_REDUCTION_SUM, "invalid reduction ",
          static_cast<int>(r));
  return static_cast<acc::Reduction>(r);
}

std::vector<at::Tensor> tensors_arg(const acc_tensor* const* tensors, size_t n, const std::string& array) {
  require(tensors || n == 0, array, " is NULL but n is ", n);
  const std::string item = array + "[i]";
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(live(tensors[i], item.c_str()).tensor);
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

#include "tensor/named_tensors.h"

#include <set>
#include <tuple>

namespace acc {
namespace {

// (A detached state-dict entry is a tensor of its own over the same memory: aliases are told by
// their place, shape, strides and dtype.)
using AliasKey = std::tuple<const void*, std::vector<int64_t>, std::vector<int64_t>, at::ScalarType>;
AliasKey alias_key(const at::Tensor& t) { return {t.data_ptr(), t.sizes().vec(), t.strides().vec(), t.scalar_type()}; }

}  // namespace

bool are_aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() > 0 && b.numel() > 0 && alias_key(a) == alias_key(b);
}

NamedTensors without_aliases(const NamedTensors& tensors) {
  std::set<AliasKey> listed;
  NamedTensors out;
  for (const auto& entry : tensors) {
    const at::Tensor& t = entry.second;
    if (t.numel() > 0 && !listed.insert(alias_key(t)).second) continue;  // an alias of an earlier entry
    out.push_back(entry);
  }
  return out;
}

}  // namespace acc

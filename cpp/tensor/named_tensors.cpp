#include "tensor/named_tensors.h"

#include <set>
#include <tuple>

namespace acc {

NamedTensors without_aliases(const NamedTensors& tensors) {
  // (A detached state-dict entry is a tensor of its own over the same memory: aliases are told by
  // their place, shape, strides and dtype.)
  std::set<std::tuple<const void*, std::vector<int64_t>, std::vector<int64_t>, at::ScalarType>> listed;
  NamedTensors out;
  for (const auto& entry : tensors) {
    const at::Tensor& t = entry.second;
    if (t.numel() > 0 && !listed.emplace(t.data_ptr(), t.sizes().vec(), t.strides().vec(), t.scalar_type()).second)
      continue;  // an alias of an earlier entry
    out.push_back(entry);
  }
  return out;
}

}  // namespace acc

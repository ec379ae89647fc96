#include "parallel/broadcast.h"

#include <map>

namespace acc {

void broadcast_in_place(Distributed& dist, const std::vector<at::Tensor>& tensors, const std::string& name,
                        int64_t source) {
  at::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors)
    if (t.numel() > 0) by_dtype[t.scalar_type()].push_back(t.detach());
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (const auto& t : group) flat.push_back(t.reshape({-1}).to(dist.device()));
    std::vector<at::Tensor> list{at::cat(flat)};
    c10d::BroadcastOptions options;
    options.rootRank = source;
    wait_collective(dist.group()->broadcast(list, options), name);
    if (dist.rank() == source) continue;
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(list[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace acc

#include "parallel/broadcast.h"

#include <map>

namespace acc {
namespace {

constexpr int64_t kBucketBytes = int64_t{250} << 20;

void broadcast_bucket(Distributed& dist, const std::vector<at::Tensor>& bucket, const std::string& name,
                      int64_t source) {
  c10d::BroadcastOptions options;
  options.rootRank = source;
  const at::Tensor& only = bucket.front();
  if (bucket.size() == 1 && only.is_contiguous() && only.device() == dist.device()) {
    std::vector<at::Tensor> list{only};  // in place: no staging copy
    wait_collective(dist.group()->broadcast(list, options), name);
    return;
  }
  std::vector<at::Tensor> flat;
  for (const auto& t : bucket) flat.push_back(t.reshape({-1}).to(dist.device()));
  std::vector<at::Tensor> list{at::cat(flat)};
  flat.clear();
  wait_collective(dist.group()->broadcast(list, options), name);
  if (dist.rank() == source) return;
  int64_t offset = 0;
  for (const auto& t : bucket) {
    t.copy_(list[0].narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace

std::vector<std::vector<at::Tensor>> broadcast_buckets(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors)
    if (t.numel() > 0) by_dtype[t.scalar_type()].push_back(t.detach());
  std::vector<std::vector<at::Tensor>> buckets;
  for (auto& [dtype, group] : by_dtype) {
    int64_t bytes = 0;
    for (size_t i = 0; i < group.size(); ++i) {
      const int64_t size = group[i].numel() * static_cast<int64_t>(group[i].element_size());
      if (i == 0 || bytes + size > bucket_bytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(group[i]);
      bytes += size;
    }
  }
  return buckets;
}

void broadcast_in_place(Distributed& dist, const std::vector<at::Tensor>& tensors, const std::string& name,
                        int64_t source) {
  at::NoGradGuard no_grad;
  for (const auto& bucket : broadcast_buckets(tensors, kBucketBytes)) broadcast_bucket(dist, bucket, name, source);
}

}  // namespace acc

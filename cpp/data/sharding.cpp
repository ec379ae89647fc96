#include "data/sharding.h"

#include "common/error.h"

namespace acc {

std::vector<std::vector<int64_t>> shard_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches) {
  require(num_processes >= 1 && rank >= 0 && rank < num_processes, "rank ", rank, " is not in a job of ",
          num_processes);
  const int64_t p = num_processes;
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> initial, pending;
  const auto full = static_cast<size_t>(batch_size);
  int64_t idx = 0;
  for (; idx < static_cast<int64_t>(batches.size()); ++idx) {
    const auto& batch = batches[idx];
    if (!drop_last && idx < p) initial.insert(initial.end(), batch.begin(), batch.end());
    if (idx % p == rank) pending = batch;
    if (idx % p == p - 1 && batch.size() == full) {
      out.push_back(pending);
      pending.clear();
    }
  }
  if (drop_last || initial.empty()) return out;
  if (!even_batches) {
    if (!pending.empty()) out.push_back(pending);
    return out;
  }
  if (pending.size() == full) out.push_back(pending);
  while (static_cast<int64_t>(initial.size()) < p * batch_size) initial.insert(initial.end(), initial.begin(), initial.end());
  // Complete the last (short) batch, then add full batches until every process has the same count.
  std::vector<int64_t> batch = batches.back();
  --idx;
  if (batch.size() == full) {
    batch.clear();
    ++idx;
  }
  size_t cycle = 0;
  while (idx % p != 0 || !batch.empty()) {
    const size_t end = cycle + full - batch.size();
    batch.insert(batch.end(), initial.begin() + static_cast<std::ptrdiff_t>(cycle),
                 initial.begin() + static_cast<std::ptrdiff_t>(end));
    if (idx % p == rank) out.push_back(batch);
    cycle = end;
    batch.clear();
    ++idx;
  }
  return out;
}

int64_t sharded_length(int64_t num_batches, bool drop_last, int64_t num_processes, int64_t rank, bool even_batches) {
  const int64_t p = num_processes;
  if (drop_last) return num_batches / p;
  if (even_batches) return (num_batches + p - 1) / p;
  return num_batches / p + (rank < num_batches % p ? 1 : 0);
}

}  // namespace acc

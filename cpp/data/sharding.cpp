#include "data/sharding.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "data/iterable.h"

namespace acc {

std::vector<std::vector<int64_t>> shard_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches) {
  require(num_processes >= 1 && rank >= 0 && rank < num_processes, "rank ", rank, " is not in a job of ",
          num_processes);
  const int64_t p = num_processes;
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> initial, pending;
  const bool variable = batch_size <= 0;  // a batch sampler of varying sizes (Accelerate's batch_size None)
  const auto full = static_cast<size_t>(variable ? 0 : batch_size);
  int64_t idx = 0;
  for (; idx < static_cast<int64_t>(batches.size()); ++idx) {
    const auto& batch = batches[idx];
    if (!drop_last && idx < p) initial.insert(initial.end(), batch.begin(), batch.end());
    if (idx % p == rank) pending = batch;
    if (idx % p == p - 1 && (variable || batch.size() == full)) {
      out.push_back(pending);
      pending.clear();
    }
  }
  if (drop_last || initial.empty()) return out;
  if (!even_batches) {
    if (!pending.empty()) out.push_back(pending);
    return out;
  }
  if (variable) {
    // No batch size to complete a batch to: the pending batch goes as it is, and the round is
    // completed with whole batches from the epoch's first P, in turn (as often as needed).
    if (!pending.empty()) out.push_back(pending);
    const auto first = std::min<size_t>(batches.size(), static_cast<size_t>(p));
    for (size_t cycle = 0; idx % p != 0; ++idx, ++cycle)
      if (idx % p == rank) out.push_back(batches[cycle % first]);
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

std::vector<int64_t> shard_iterable(int64_t n, int64_t batch_size, bool drop_last, int64_t num_processes,
                                    int64_t rank, bool split) {
  IterableSharder<int64_t> sharder(batch_size, drop_last, num_processes, rank, split);
  std::vector<int64_t> out;
  for (int64_t element = 0; element < n; ++element) sharder.push(element, out);
  sharder.finish(out);
  return out;
}

int64_t per_process_batch_size(int64_t batch_size, int64_t num_processes, bool split) {
  const int64_t per = split ? batch_size / num_processes : batch_size;
  require(per >= 1, "split_batches gives each of the ", num_processes, " processes batches of ", per,
          " samples: the batch size (", batch_size, ") must be at least the number of processes");
  return per;
}

void check_sharding(int64_t batch_size, int64_t num_processes, bool split) {
  require(!split || batch_size % num_processes == 0, "split_batches needs a batch size (", batch_size,
          ") that is a round multiple of the number of processes (", num_processes, ")");
  require(split || batch_size <= std::numeric_limits<int64_t>::max() / num_processes, "batch_size ", batch_size,
          " times ", num_processes, " processes (the batch of every process together) does not fit in 64 bits");
}

std::vector<std::vector<int64_t>> split_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches) {
  check_sharding(batch_size, num_processes, true);
  const auto full = static_cast<size_t>(batch_size);
  const auto per = static_cast<size_t>(batch_size / num_processes), begin = per * static_cast<size_t>(rank);
  auto slice = [&](const std::vector<int64_t>& batch) {
    const size_t end = std::min(batch.size(), begin + per);
    return std::vector<int64_t>(batch.begin() + static_cast<std::ptrdiff_t>(std::min(begin, batch.size())),
                                batch.begin() + static_cast<std::ptrdiff_t>(end));
  };
  std::vector<std::vector<int64_t>> out;
  for (const auto& batch : batches)
    if (batch.size() == full) out.push_back(slice(batch));
  if (drop_last || batches.empty() || batches.back().size() == full) return out;
  std::vector<int64_t> last = batches.back();
  if (!even_batches) {
    if (last.size() > begin) out.push_back(slice(last));
    return out;
  }
  std::vector<int64_t> initial = batches.front();
  while (initial.size() < full) initial.insert(initial.end(), initial.begin(), initial.end());
  last.insert(last.end(), initial.begin(), initial.end());
  out.push_back(slice(last));
  return out;
}


}  // namespace acc

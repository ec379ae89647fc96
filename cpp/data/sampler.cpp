#include "data/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "common/error.h"
#include "common/random.h"

namespace acc {

uint64_t epoch_generator_seed(std::optional<uint64_t> seed, int64_t epoch) {
  if (seed) return (*seed + static_cast<uint64_t>(epoch)) & 0xffffffffull;  // Python: (seed + epoch) mod 2^32
  return draw_seed();
}

std::vector<int64_t> permutation(int64_t n, at::Generator& generator) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  at::Tensor perm = at::randperm(n, generator, at::TensorOptions().dtype(at::kLong));
  std::copy(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n, order.begin());
  return order;
}

std::vector<int64_t> permutation(int64_t n, uint64_t generator_seed) {
  at::Generator generator = seeded_generator(generator_seed);
  return permutation(n, generator);
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, std::optional<uint64_t> seed, int64_t epoch) {
  if (shuffle) return permutation(n, epoch_generator_seed(seed, epoch));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& order, int64_t batch_size, bool drop_last) {
  require(batch_size >= 1, "batch_size must be at least 1, got ", batch_size);
  std::vector<std::vector<int64_t>> batches;
  const auto size = static_cast<size_t>(batch_size);
  for (size_t start = 0; start < order.size(); start += size) {
    const size_t end = std::min(order.size(), start + size);
    if (drop_last && end - start < size) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
}

}  // namespace acc

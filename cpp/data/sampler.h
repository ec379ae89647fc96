// The order of a map-style dataset in an epoch, and its batches.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace acc {

// 0..n-1, or a permutation of it. With a seed, epoch e is randperm(n) from a CPU generator
// seeded with seed + e (Accelerate's SeedableRandomSampler; the same on every process). Without
// one, the permutation's seed is drawn from torch's default generator, as PyTorch's RandomSampler
// does, so acc_set_seed makes it reproducible.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, std::optional<uint64_t> seed, int64_t epoch);

// The two halves of a shuffled epoch_order: the seed of epoch `epoch`'s generator ((seed + epoch)
// mod 2^32, or drawn from torch's default generator without a seed), and the permutation it gives.
// A checkpoint keeps the first, so a resumed epoch has the same order without redrawing.
uint64_t epoch_generator_seed(std::optional<uint64_t> seed, int64_t epoch);
std::vector<int64_t> permutation(int64_t n, uint64_t generator_seed);
// randperm(n) from `generator`, which it advances.
std::vector<int64_t> permutation(int64_t n, at::Generator& generator);

// Consecutive batches of batch_size; the last one is shorter, or dropped with drop_last.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& order, int64_t batch_size, bool drop_last);

}  // namespace acc

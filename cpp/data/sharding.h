// Accelerate's BatchSamplerShard (split_batches=False): which of an epoch's batches a process gets.
#pragma once

#include <cstdint>
#include <vector>

namespace acc {

// batches: the epoch's batches of the whole dataset, in order (the last may be short unless
// drop_last). Batch k goes to process k mod P; with even_batches the last round is completed with
// samples from the start of the epoch so every process gets the same number of full batches.
std::vector<std::vector<int64_t>> shard_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches);

// How many batches shard_batches gives a process when the dataset has `num_batches` batches.
int64_t sharded_length(int64_t num_batches, bool drop_last, int64_t num_processes, int64_t rank, bool even_batches);

}  // namespace acc

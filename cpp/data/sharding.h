// Accelerate's BatchSamplerShard: which of an epoch's batches a process gets.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace acc {

// How one process's loader is sharded (ShardedDataLoader, IterableDataLoader).
struct ShardOptions {
  int64_t num_processes = 1;
  int64_t rank = 0;
  bool split_batches = false;  // each batch is cut into per-process slices (batch_size is global)
  bool even_batches = true;    // the last round is completed from the epoch's start
  // For a shuffle without a seed: sets a generator to process 0's state (see synchronize_shuffle).
  std::function<void(at::Generator&)> synchronize_generator;
};

// batches: the epoch's batches of the whole dataset, in order (the last may be short unless
// drop_last). Batch k goes to process k mod P; with even_batches the last round is completed with
// samples from the start of the epoch so every process gets the same number of full batches.
// batch_size 0: batches of varying sizes (a custom batch sampler, Accelerate's batch_size None): with
// even_batches the last round is completed with whole batches of the epoch's start instead.
std::vector<std::vector<int64_t>> shard_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches);

// split_batches: every batch is cut into num_processes slices of batch_size / num_processes and each
// process takes its slice; the last short batch is completed from the epoch's first batch
// (even_batches) or cut as it is. Needs batch_size % num_processes == 0.
std::vector<std::vector<int64_t>> split_batches(const std::vector<std::vector<int64_t>>& batches, int64_t batch_size,
                                                bool drop_last, int64_t num_processes, int64_t rank,
                                                bool even_batches);

// Accelerate's IterableDatasetShard over a stream of n samples (0..n-1 stand for them): the samples
// this process yields. Every process reads the whole stream in rounds of batch_size * P samples
// (batch_size with split_batches) and keeps its slice; a short last round is filled from the first
// full round (dropped with drop_last).
std::vector<int64_t> shard_iterable(int64_t n, int64_t batch_size, bool drop_last, int64_t num_processes,
                                    int64_t rank, bool split);

// The batch size of each process's loader: batch_size, or batch_size / P with split_batches (which
// must leave at least one sample).
int64_t per_process_batch_size(int64_t batch_size, int64_t num_processes, bool split);
// Samples per step over all processes (Accelerate's total_batch_size): batch_size with split_batches
// (it is global), else batch_size on each of num_processes.
inline int64_t total_batch_size(int64_t batch_size, int64_t num_processes, bool split) {
  return split ? batch_size : batch_size * num_processes;
}

// Fails, as Accelerate does, on configurations it refuses.
void check_sharding(int64_t batch_size, int64_t num_processes, bool split);

}  // namespace acc

// The loader of one process over a map-style dataset in a multi-process job (Accelerate's
// BatchSamplerShard).
#pragma once

#include "data/map_dataloader.h"
#include "data/sharding.h"

namespace acc {

// The loader of one process in a multi-process job: the same epoch order on every process (a
// shuffle needs a seed that every process shares, or a generator synchronized from process 0),
// sharded as Accelerate's BatchSamplerShard.
class ShardedDataLoader final : public MapDataLoader {
 public:
  ShardedDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, ShardOptions shard);
  int64_t length() const override;
  int64_t remainder() const override;
  int64_t total_batch_size() const override {
    return acc::total_batch_size(options().batch_size, shard_.num_processes, shard_.split_batches);
  }
  bool even_batches() const { return shard_.even_batches; }
  // For the epochs that start from now on (join_uneven_inputs's override); only between epochs.
  void set_even_batches(bool even);

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;
  // BatchSamplerShard asks its batch sampler for every batch of a round (one batch with
  // split_batches) at each request.
  int64_t sampler_tail_request() const override;

 private:
  std::vector<std::vector<int64_t>> shard(const std::vector<std::vector<int64_t>>& batches) const;

  ShardOptions shard_;
};

}  // namespace acc

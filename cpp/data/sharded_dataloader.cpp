#include "data/sharded_dataloader.h"

#include "common/error.h"
#include "data/sharding.h"

namespace acc {

ShardedDataLoader::ShardedDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, ShardOptions shard)
    : MapDataLoader(std::move(dataset), std::move(options)), shard_(shard) {
  if (this->options().shuffle && !this->options().seed) {
    require(static_cast<bool>(shard_.synchronize_generator),
            "a sharded loader that shuffles needs a shared seed or a synchronized generator");
    synchronize_shuffle(shard_.synchronize_generator);
  }
  check_sharding(this->options().batch_size, shard_.num_processes, shard_.split_batches);
  if (variable_batches())
    require(!shard_.split_batches, "batches of varying sizes cannot be split across processes (split_batches)");
}

void ShardedDataLoader::set_even_batches(bool even) {
  require(!in_epoch(), "even_batches can only change between epochs");
  shard_.even_batches = even;
}

int64_t ShardedDataLoader::length() const {
  // Exact by construction: the shard of an epoch in sequential order (lengths do not depend on order).
  return static_cast<int64_t>(shard(unshuffled_batches()).size());
}

// As Accelerate's, whatever even_batches: without it the last round's short batches are padded to
// be gathered (pad_across_processes), and that padding is what the remainder cuts off. A batch
// sampler's batches of varying sizes have no batch size to count rounds by: none (Accelerate's too).
int64_t ShardedDataLoader::remainder() const {
  if (options().drop_last || variable_batches()) return -1;
  return samples_per_epoch() % total_batch_size();
}

std::vector<std::vector<int64_t>> ShardedDataLoader::shard(const std::vector<std::vector<int64_t>>& batches) const {
  const auto& o = options();
  if (shard_.split_batches)
    return split_batches(batches, o.batch_size, o.drop_last, shard_.num_processes, shard_.rank, shard_.even_batches);
  return shard_batches(batches, variable_batches() ? 0 : o.batch_size, o.drop_last, shard_.num_processes, shard_.rank,
                       shard_.even_batches);
}

int64_t ShardedDataLoader::sampler_tail_request() const {
  const int64_t request = MapDataLoader::sampler_tail_request();
  return shard_.split_batches ? request : request / shard_.num_processes;
}

std::vector<std::vector<int64_t>> ShardedDataLoader::plan_epoch(int64_t epoch) const {
  return shard(MapDataLoader::plan_epoch(epoch));
}

}  // namespace acc

#include "data/prepare_data_loader.h"

#include <ATen/core/Generator.h>

#include "common/own_callbacks.h"
#include "data/dispatcher.h"
#include "data/iterable_dataloader.h"
#include "data/map_dataloader.h"
#include "data/sharded_dataloader.h"
#include "data/sharding.h"

namespace acc {
namespace {

// Every loader is made here. Its last reference may go on one of its own workers (a sample function
// that frees it, or a save_state called from one whose list of loaders outlives the handle): it is
// then destroyed on another thread, as a worker cannot join itself.
template <class Loader, class... Args>
std::shared_ptr<Loader> make_loader(Args&&... args) {
  return shared_outside_own_callbacks<Loader, DataLoader>(new Loader(std::forward<Args>(args)...));
}

}  // namespace

std::shared_ptr<DataLoader> make_data_loader(const std::shared_ptr<Dataset>& dataset,
                                             const std::shared_ptr<IterableSource>& stream, DataLoaderOptions options) {
  if (stream) return make_loader<IterableDataLoader>(stream, std::move(options), ShardOptions{});
  // PyTorch's RandomSampler refuses to shuffle nothing (its ValueError num_samples=0).
  require(!options.shuffle || !dataset || dataset->size() > 0,
          "shuffle over an empty dataset: there is nothing to shuffle (PyTorch's RandomSampler refuses "
          "num_samples=0)");
  return make_loader<MapDataLoader>(dataset, std::move(options));
}

std::shared_ptr<DataLoader> prepare_data_loader(const DataLoader& loader, const PrepareDataLoaderOptions& o,
                                                const std::shared_ptr<Distributed>& dist, Collectives collectives) {
  DataLoaderOptions options = loader.options();
  options.device = o.device;
  options.non_blocking = o.non_blocking;
  // Accelerate's SeedableRandomSampler (use_seedable_sampler; data_seed counts only with it): epoch e
  // shuffles with data_seed + e, or with the seed torch's generator was seeded with (rank 0's, below).
  const bool seedable = options.shuffle && !options.seed && o.use_seedable_sampler;
  if (seedable) options.seed = o.data_seed ? *o.data_seed : at::detail::getDefaultCPUGenerator().current_seed();
  const bool seed_of_rank_0 = seedable && !o.data_seed;
  const auto* stream = dynamic_cast<const IterableDataLoader*>(&loader);
  const auto* map = dynamic_cast<const MapDataLoader*>(&loader);
  require(stream || map, "the data loader needs a dataset");  // a loader prepared already
  const ShardOptions shard_options{o.num_processes, o.process_index, o.split_batches, o.even_batches, {}};
  // Accelerate's dispatcher drops the loader's own generator from the loader it reads through, on one
  // process too (where we need no dispatcher): each epoch's base seed comes from torch's generator.
  const bool dispatch = o.dispatch_batches.value_or(stream != nullptr);
  options.base_seed_from_global_generator = dispatch;
  std::shared_ptr<DataLoader> prepared;
  if (dist && dispatch) {
    // Process 0 reads through a plain loader (shuffled as the options above say) and sends every
    // process its slice.
    // Split, a batch must divide, or the slices would drop each batch's remainder. (Accelerate lets a
    // batch of 1 through, and its dispatcher then sends every process 0 samples of it but the last.)
    if (options.batch_size > 1 || o.split_batches) check_sharding(options.batch_size, o.num_processes, o.split_batches);
    DataLoaderOptions base_options = options;
    base_options.device.reset();
    auto base = make_data_loader(map ? map->dataset() : nullptr, stream ? stream->source() : nullptr, base_options);
    prepared = make_loader<DispatchingDataLoader>(base, dist, o.split_batches);
    prepared->set_device_option(options.device);
  } else if (stream) {
    // Refused here, as Accelerate's prepare (and its IterableDatasetShard) refuses it, not at the
    // first batch.
    if (o.num_processes > 1) check_sharding(options.batch_size, o.num_processes, o.split_batches);
    prepared = make_loader<IterableDataLoader>(stream->source(), options, shard_options);
  } else if (dist) {
    // Every process must shuffle alike: the seedable sampler's seed is rank 0's; without a seed,
    // the loader's generator takes rank 0's state at the start of every epoch, as Accelerate's.
    ShardOptions shard = shard_options;
    // (Both broadcasts are announced: a process at another collective there fails at once, naming it.)
    if (seed_of_rank_0) {
      at::Tensor seed = at::tensor({static_cast<int64_t>(*options.seed & 0x7fffffffffffffffull)}, at::kLong);
      options.seed = static_cast<uint64_t>(collectives.broadcast(seed, 0, "prepare_dataloader (seed)").item<int64_t>());
    } else if (options.shuffle && !options.seed) {
      shard.synchronize_generator = [collectives](at::Generator& generator) mutable {
        generator.set_state(collectives.broadcast(generator.get_state(), 0, "data loader shuffle (generator state)"));
      };
    }
    auto sharded = make_loader<ShardedDataLoader>(map->dataset(), options, shard);
    sharded->fetch_one_ahead();  // DataLoaderShard's iteration
    prepared = sharded;
  } else {
    auto plain = make_loader<MapDataLoader>(map->dataset(), options);
    plain->fetch_one_ahead();
    prepared = plain;
  }
  prepared->mark_prepared();
  // A new loader at epoch 0, as Accelerate's DataLoaderShard starts its iteration count at 0 whatever
  // epochs the loader it wraps has run (a seedable shuffle starts at seed + 0).
  return prepared;
}

namespace {

using EvenBatchesChanges = std::vector<std::pair<std::weak_ptr<ShardedDataLoader>, bool>>;

void restore_even_batches(const EvenBatchesChanges& changed) {
  for (const auto& [weak, before] : changed)
    if (auto loader = weak.lock()) loader->set_even_batches(before);
}

}  // namespace

std::function<void()> override_even_batches(const std::vector<std::shared_ptr<DataLoader>>& loaders, bool even) {
  EvenBatchesChanges changed;
  try {
    for (const auto& loader : loaders)
      if (auto sharded = std::dynamic_pointer_cast<ShardedDataLoader>(loader)) {
        const bool before = sharded->even_batches();
        sharded->set_even_batches(even);
        changed.emplace_back(sharded, before);
      }
  } catch (...) {
    restore_even_batches(changed);
    throw;
  }
  return [changed] { restore_even_batches(changed); };
}

}  // namespace acc

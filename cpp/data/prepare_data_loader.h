// Accelerate's prepare_data_loader: the loader one process of a job iterates, made from the loader
// the program built. It chooses among a plain loader (one process), a sharded one (map-style
// datasets), a stream loader (iterable datasets) and a dispatching one (process 0 reads and sends
// every process its slice), and makes every process shuffle alike.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/iterable.h"
#include "ops/collectives.h"
#include "state/distributed.h"

namespace acc {

// A loader over a map-style dataset, or over a stream when `stream` is set (one process's view).
std::shared_ptr<DataLoader> make_data_loader(const std::shared_ptr<Dataset>& dataset,
                                             const std::shared_ptr<IterableSource>& stream, DataLoaderOptions options);

// prepare_data_loader's parameters, as Accelerate names them.
struct PrepareDataLoaderOptions {
  int64_t num_processes = 1;
  int64_t process_index = 0;
  bool split_batches = false;
  bool even_batches = true;
  std::optional<bool> dispatch_batches;  // none: dispatch streams only
  std::optional<c10::Device> device;     // where batches go; none: where the dataset is
  bool non_blocking = true;
  // A shuffling loader without a seed of its own shuffles epoch e with data_seed + e, or without
  // data_seed with the seed torch's generator was seeded with + e; data_seed alone does nothing.
  bool use_seedable_sampler = false;
  std::optional<uint64_t> data_seed;
};

// `collectives` broadcast rank 0's seed or generator state (on one process they are the identity);
// `dist` is null on one process. The new loader starts at `loader`'s epoch.
std::shared_ptr<DataLoader> prepare_data_loader(const DataLoader& loader, const PrepareDataLoaderOptions& options,
                                                const std::shared_ptr<Distributed>& dist, Collectives collectives);

// join_uneven_inputs' even_batches override: sets it on the sharded map-style loaders among
// `loaders` (streams and dispatched loaders keep theirs, as in Accelerate, which overrides batch
// samplers only). Returns what puts the loaders that still exist back as they were.
std::function<void()> override_even_batches(const std::vector<std::shared_ptr<DataLoader>>& loaders, bool even);

}  // namespace acc

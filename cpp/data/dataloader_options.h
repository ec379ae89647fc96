// A loader's settings and the ACC_OPTIONS_DATALOADER keys that fill them (one table: each default
// is the member initializer here).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/option_table.h"
#include "data/callback_dataset.h"

namespace acc {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  std::optional<uint64_t> seed;  // seedable shuffling; none: drawn from torch's default generator
  // PyTorch's DataLoader(generator=torch.Generator().manual_seed(generator_seed)): the loader's own
  // generator, from which each epoch's base seed (and, shuffling without a seed, the order) is drawn
  // instead of from torch's global generator. Copies of these options share it (a prepared loader
  // and the one it wraps), as Python's loaders share the generator object. Undefined: none.
  at::Generator generator;
  // Accelerate's dispatcher drops DataLoader(generator=...) from the loader it reads through (its
  // sampler keeps it): each epoch's base seed then comes from torch's global generator, the order
  // still from `generator`.
  bool base_seed_from_global_generator = false;
  const at::Generator& base_seed_generator() const {
    static const at::Generator global;  // undefined: torch's global generator
    return base_seed_from_global_generator ? global : generator;
  }
  size_t num_workers = 0;        // worker threads fetching batches; 0 (PyTorch's default) loads in the caller's thread
  size_t prefetch_factor = 2;    // batches fetched ahead, per worker
  std::optional<c10::Device> device;  // where batches go; none: where the dataset is
  bool non_blocking = true;           // asynchronous copies to a CUDA device (from pinned memory)
  CollateFn collate;                  // none: the dataset's own batching (stacking)
  int64_t skip_batches = 0;           // batches of the next epoch not to yield (skip_first_batches)
  // A batch sampler's batches (dataset indices), yielded in this order every epoch; sizes may vary.
  // batch_size then comes from them (see DataLoader), and shuffle and drop_last do not apply.
  // Empty: consecutive batches of batch_size.
  std::vector<std::vector<int64_t>> batches;
};

const OptionTable<DataLoaderOptions>& dataloader_option_table();

// Loader options from an options object of kind dataloader.
DataLoaderOptions dataloader_options(const Options& options);
// The same for a loader over a batch sampler's `batches`: batch_size, shuffle, drop_last and seed are
// the sampler's business and are refused.
DataLoaderOptions dataloader_options(const Options& options, std::vector<std::vector<int64_t>> batches);

}  // namespace acc

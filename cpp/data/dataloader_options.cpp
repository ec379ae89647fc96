#include "data/dataloader_options.h"

#include "common/device.h"
#include "common/error.h"
#include "common/random.h"

namespace acc {

const OptionTable<DataLoaderOptions>& dataloader_option_table() {
  using D = DataLoaderOptions;
  static const OptionTable<D> table(OptionsKind::DataLoader, [](OptionTable<D>& t) {
    t.bind("batch_size", "samples per batch", &D::batch_size).at_least(1);
    t.bind("shuffle", "a new order every epoch", &D::shuffle);
    t.bind("drop_last", "drop an epoch's short last batch", &D::drop_last);
    t.bind("seed", "seedable shuffling: epoch e uses seed + e", &D::seed).at_least(0);
    t.bind_with(
         "generator_seed", OptionType::Int,
         "the loader's own generator, seeded so (PyTorch's generator=): base seeds and shuffles draw from it",
         [](D& d, const OptionValue& v) {
           d.generator = seeded_generator(static_cast<uint64_t>(std::get<int64_t>(v)));
         },
         [](const D& d) {  // the seed it was made with, whatever it has drawn since
           return d.generator.defined() ? std::optional<OptionValue>(static_cast<int64_t>(d.generator.current_seed()))
                                        : std::nullopt;
         })
        .at_least(0);
    t.bind("num_workers", "worker threads fetching batches; 0: the calling thread", &D::num_workers)
        .at_least(0)
        .at_most(64);
    t.bind("prefetch_factor", "batches fetched ahead per worker", &D::prefetch_factor).at_least(1).at_most(1024);
    t.bind_with(
        "device", OptionType::String, "where batches are put; unset: where the dataset is",
        [](D& d, const OptionValue& v) { d.device = parse_device(std::get<std::string>(v)); },
        [](const D& d) { return d.device ? std::optional<OptionValue>(device_name(*d.device)) : std::nullopt; });
  });
  return table;
}

DataLoaderOptions dataloader_options(const Options& o) {
  require(o.kind() == OptionsKind::DataLoader, "data loader options must be of kind dataloader, got ",
          options_kind_name(o.kind()));
  return dataloader_option_table().read(o);
}

DataLoaderOptions dataloader_options(const Options& o, std::vector<std::vector<int64_t>> batches) {
  for (const char* key : {"batch_size", "shuffle", "drop_last", "seed"})
    require(!o.has(key), "option '", key, "' does not apply to a loader over given batches");
  require(!batches.empty(), "a batch sampler needs at least one batch (num_batches must be at least 1)");
  DataLoaderOptions options = dataloader_options(o);
  options.batches = std::move(batches);
  return options;
}

}  // namespace acc

#include "data/dataloader.h"

#include "common/error.h"
#include "data/sampler.h"
#include "data/sharding.h"

namespace acc {

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  require(dataset_ != nullptr, "the data loader needs a dataset");
  require(options_.batch_size >= 1, "batch_size must be at least 1, got ", options_.batch_size);
  require(options_.prefetch_factor >= 1, "prefetch_factor must be at least 1");
}

int64_t DataLoader::length() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

int64_t DataLoader::remainder() const {
  return options_.drop_last ? -1 : dataset_->size() % options_.batch_size;
}

void DataLoader::set_collate(CollateFn collate) {
  require(!in_epoch_, "the collate function can only change between epochs");
  options_.collate = std::move(collate);
}

void DataLoader::skip_first_batches(int64_t batches) {
  require(!in_epoch_, "skip_first_batches applies to the next epoch: call it between epochs");
  require(batches >= 0, "cannot skip a negative number of batches (", batches, ")");
  options_.skip_batches = batches;
}

void DataLoader::set_epoch(int64_t epoch) {
  require(!in_epoch_, "set_epoch is only allowed between epochs");
  require(epoch >= 0, "epoch must not be negative, got ", epoch);
  epoch_ = epoch;
}

int64_t DataLoader::position() const {
  return in_epoch_ && prefetcher_ ? static_cast<int64_t>(prefetcher_->consumed()) : 0;
}

std::vector<std::vector<int64_t>> DataLoader::plan_epoch(int64_t epoch) const {
  return make_batches(epoch_order(dataset_->size(), options_.shuffle, options_.seed, epoch), options_.batch_size,
                      options_.drop_last);
}

void DataLoader::start_epoch() {
  prefetcher_.reset();
  plan_ = plan_epoch(epoch_);
  const auto skip = static_cast<size_t>(std::min<int64_t>(options_.skip_batches, static_cast<int64_t>(plan_.size())));
  plan_.erase(plan_.begin(), plan_.begin() + static_cast<std::ptrdiff_t>(skip));
  options_.skip_batches = 0;
  auto fetch = [this](size_t index) {
    std::vector<at::Tensor> batch;
    if (options_.collate) {
      std::vector<std::vector<at::Tensor>> samples;
      for (int64_t i : plan_[index]) samples.push_back(dataset_->get(i));
      batch = options_.collate(samples);
    } else {
      batch = dataset_->get_batch(plan_[index]);
    }
    if (options_.device)
      for (auto& field : batch) field = field.to(*options_.device, /*non_blocking=*/true);
    return batch;
  };
  prefetcher_ = std::make_unique<Prefetcher>(plan_.size(), fetch, options_.num_workers,
                                             options_.prefetch_factor * std::max<size_t>(options_.num_workers, 1));
  in_epoch_ = true;
  end_of_epoch_ = false;
}

std::optional<std::vector<at::Tensor>> DataLoader::next() {
  if (!in_epoch_) start_epoch();
  std::vector<at::Tensor> batch;
  if (prefetcher_->next(batch)) {
    end_of_epoch_ = prefetcher_->consumed() == plan_.size();
    if (observer_) observer_->on_batch(*this, end_of_epoch_);
    return batch;
  }
  // End of the epoch: the next call starts the following one.
  prefetcher_.reset();
  in_epoch_ = false;
  ++epoch_;
  if (observer_) observer_->on_epoch_end(*this);
  return std::nullopt;
}

ShardedDataLoader::ShardedDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, ShardOptions shard)
    : DataLoader(std::move(dataset), std::move(options)), shard_(shard) {
  require(!this->options().shuffle || this->options().seed, "a sharded loader that shuffles needs a shared seed");
  check_sharding(this->options().batch_size, shard_.num_processes, shard_.split_batches);
}

int64_t ShardedDataLoader::length() const {
  // Exact by construction: the shard of an epoch in sequential order (lengths do not depend on order).
  std::vector<int64_t> order(static_cast<size_t>(dataset()->size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  return static_cast<int64_t>(shard(make_batches(order, options().batch_size, options().drop_last)).size());
}

int64_t ShardedDataLoader::remainder() const {
  if (options().drop_last || !shard_.even_batches) return -1;
  const int64_t total_batch_size = options().batch_size * (shard_.split_batches ? 1 : shard_.num_processes);
  return dataset()->size() % total_batch_size;
}

std::vector<std::vector<int64_t>> ShardedDataLoader::shard(const std::vector<std::vector<int64_t>>& batches) const {
  const auto& o = options();
  if (shard_.split_batches)
    return split_batches(batches, o.batch_size, o.drop_last, shard_.num_processes, shard_.rank, shard_.even_batches);
  return shard_batches(batches, o.batch_size, o.drop_last, shard_.num_processes, shard_.rank, shard_.even_batches);
}

std::vector<std::vector<int64_t>> ShardedDataLoader::plan_epoch(int64_t epoch) const {
  return shard(DataLoader::plan_epoch(epoch));
}

}  // namespace acc

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
  auto fetch = [this](size_t index) {
    auto batch = dataset_->get_batch(plan_[index]);
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

ShardedDataLoader::ShardedDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                                     int64_t num_processes, int64_t rank, bool even_batches)
    : DataLoader(std::move(dataset), std::move(options)),
      num_processes_(num_processes),
      rank_(rank),
      even_batches_(even_batches) {
  require(!this->options().shuffle || this->options().seed, "a sharded loader that shuffles needs a shared seed");
}

int64_t ShardedDataLoader::length() const {
  return sharded_length(DataLoader::length(), options().drop_last, num_processes_, rank_, even_batches_);
}

int64_t ShardedDataLoader::remainder() const {
  if (options().drop_last || !even_batches_) return -1;
  return dataset()->size() % (options().batch_size * num_processes_);
}

std::vector<std::vector<int64_t>> ShardedDataLoader::plan_epoch(int64_t epoch) const {
  return shard_batches(DataLoader::plan_epoch(epoch), options().batch_size, options().drop_last, num_processes_, rank_,
                       even_batches_);
}

}  // namespace acc

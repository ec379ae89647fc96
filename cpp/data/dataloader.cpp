#include "data/dataloader.h"

#include "common/device.h"
#include "common/error.h"
#include "common/random.h"
#include "data/iterable_dataloader.h"
#include "data/sampler.h"
#include "data/sharding.h"

namespace acc {

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  require(dataset_ != nullptr, "the data loader needs a dataset");
  require(options_.prefetch_factor >= 1, "prefetch_factor must be at least 1");
  if (!options_.batches.empty()) {
    require(!options_.shuffle && !options_.drop_last, "a loader over given batches cannot shuffle or drop_last",
            " (the batch sampler decides both)");
    const int64_t n = dataset_->size();
    for (size_t b = 0; b < options_.batches.size(); ++b) {
      require(!options_.batches[b].empty(), "batch ", b, " of the batch sampler is empty");
      for (int64_t i : options_.batches[b])
        require(i >= 0 && i < n, "batch ", b, " holds index ", i, ", outside the dataset of ", n, " samples");
    }
    // A standard batch sampler: every batch of one size, the last one possibly shorter.
    const size_t first = options_.batches.front().size();
    for (size_t b = 0; b < options_.batches.size(); ++b) {
      const size_t size = options_.batches[b].size();
      if (size != first && !(b + 1 == options_.batches.size() && size < first)) variable_batches_ = true;
    }
    options_.batch_size = static_cast<int64_t>(first);
  }
  require(options_.batch_size >= 1, "batch_size must be at least 1, got ", options_.batch_size);
}

int64_t DataLoader::samples_per_epoch() const {
  if (options_.batches.empty()) return dataset_->size();
  int64_t total = 0;
  for (const auto& batch : options_.batches) total += static_cast<int64_t>(batch.size());
  return total;
}

std::vector<std::vector<int64_t>> DataLoader::unshuffled_batches() const {
  if (!options_.batches.empty()) return options_.batches;
  return make_batches(epoch_order(dataset_->size(), false, std::nullopt, 0), options_.batch_size, options_.drop_last);
}

DataLoader::DataLoader(DataLoaderOptions options) : options_(std::move(options)) {
  require(options_.batch_size >= 1, "batch_size must be at least 1, got ", options_.batch_size);
}

void DataLoader::batch_handed_out(bool last_of_epoch) {
  end_of_epoch_ = last_of_epoch;
  if (observer_) observer_->on_batch(*this, end_of_epoch_);
}

void DataLoader::end_epoch() {
  if (!in_epoch_) return;
  abandon_epoch();
  prefetcher_.reset();
  plan_.clear();
  epoch_finished();
}

void DataLoader::epoch_finished() {
  in_epoch_ = false;
  ++epoch_;
  if (observer_) observer_->on_epoch_end(*this);
}

std::vector<at::Tensor> DataLoader::to_device(std::vector<at::Tensor> batch) const {
  if (!options_.device) return batch;
  // To a GPU through pinned (page-locked) memory, so the copy can overlap with compute.
  const bool pin = options_.device->is_cuda() && options_.non_blocking;
  for (auto& field : batch) {
    if (field.device() == *options_.device) continue;
    if (pin && field.is_cpu()) field = field.pin_memory();
    field = field.to(*options_.device, options_.non_blocking);
  }
  return batch;
}

int64_t DataLoader::length() const {
  if (!options_.batches.empty()) return static_cast<int64_t>(options_.batches.size());
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

int64_t DataLoader::remainder() const {
  if (!options_.batches.empty()) return -1;  // one process: nothing is padded
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

void DataLoader::take_iterator_draw() {
  if (!std::exchange(iterator_draw_taken_, false)) draw_iterator_base_seed();
}

void DataLoader::set_epoch(int64_t epoch) {
  require(!in_epoch_, "set_epoch is only allowed between epochs");
  require(epoch >= 0, "epoch must not be negative, got ", epoch);
  epoch_ = epoch;
}

int64_t DataLoader::position() const {
  return in_epoch_ && prefetcher_ ? skipped_ + static_cast<int64_t>(prefetcher_->consumed()) : 0;
}

LoaderState DataLoader::state() const {
  LoaderState state;
  state.epoch = epoch_;
  state.seed = options_.seed;
  // Between epochs a loaded state may still be pending: it is the state until the epoch starts.
  state.position = in_epoch_ ? position() : options_.skip_batches;
  state.epoch_seed = in_epoch_ ? epoch_seed_ : resume_seed_;
  if (!generator_) return state;
  if (!in_epoch_ && !resume_generator_state_.empty()) {
    state.generator_state = resume_generator_state_;
  } else {
    const at::Tensor bytes = in_epoch_ ? epoch_start_generator_state_ : generator_->get_state();
    state.generator_state.assign(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
  }
  return state;
}

void DataLoader::check_state(const LoaderState& state) const {
  require(state.epoch >= 0 && state.position >= 0, "a loader state has a negative epoch or position");
  const int64_t batches = length();
  require(batches < 0 || state.position <= batches, "a loader state's position (", state.position,
          ") is past the end of an epoch of ", batches, " batches");
  if (state.generator_state.empty()) return;
  require(generator_.has_value(), "the saved loader shuffled with a generator synchronized across processes, "
          "this one does not (prepare it as it was: shuffle without a seed, on several processes)");
  const int64_t expected = generator_->get_state().numel();
  require(static_cast<int64_t>(state.generator_state.size()) == expected, "the saved shuffle generator state has ",
          state.generator_state.size(), " bytes, a CPU generator's has ", expected);
}

void DataLoader::load_state(const LoaderState& state) {
  require(!in_epoch_, "a data loader's state can only be loaded between epochs (before iterating)");
  check_state(state);
  set_epoch(state.epoch);
  skip_first_batches(state.position);
  iterator_draw_taken_ = state.position > 0;
  resume_seed_ = state.epoch_seed;
  resume_generator_state_ = state.generator_state;
  if (state.seed) options_.seed = state.seed;
}

void DataLoader::synchronize_shuffle(std::function<void(at::Generator&)> synchronize) {
  require(!in_epoch_, "the shuffle can only change between epochs");
  require(options_.shuffle && !options_.seed, "a synchronized shuffle is for a shuffling loader without a seed");
  require(static_cast<bool>(synchronize), "synchronize_shuffle needs a function");
  generator_ = seeded_generator(draw_seed());
  synchronize_ = std::move(synchronize);
}

std::vector<std::vector<int64_t>> DataLoader::plan_epoch(int64_t) const {
  if (!options_.batches.empty()) return options_.batches;
  return make_batches(options_.shuffle ? order_ : epoch_order(dataset_->size(), false, std::nullopt, 0),
                      options_.batch_size, options_.drop_last);
}

void DataLoader::shuffle_epoch() {
  order_.clear();
  epoch_seed_.reset();
  if (!options_.shuffle) return;
  const int64_t n = dataset_->size();
  if (generator_ && !options_.seed) {  // a seed from an older checkpoint takes precedence
    if (!resume_generator_state_.empty()) {
      generator_->set_state(at::tensor(at::ArrayRef<uint8_t>(resume_generator_state_), at::kByte));
      resume_generator_state_.clear();
    }
    synchronize_(*generator_);
    epoch_start_generator_state_ = generator_->get_state();
    order_ = permutation(n, *generator_);
  } else {
    epoch_seed_ = resume_seed_ ? *resume_seed_ : epoch_generator_seed(options_.seed, epoch_);
    order_ = permutation(n, *epoch_seed_);
  }
  resume_seed_.reset();
}

void DataLoader::start_epoch() {
  prefetcher_.reset();
  take_iterator_draw();
  shuffle_epoch();
  plan_ = plan_epoch(epoch_);
  const auto skip = static_cast<size_t>(std::min<int64_t>(take_skip_batches(), static_cast<int64_t>(plan_.size())));
  plan_.erase(plan_.begin(), plan_.begin() + static_cast<std::ptrdiff_t>(skip));
  skipped_ = static_cast<int64_t>(skip);
  auto fetch = [this](size_t index) {
    std::vector<at::Tensor> batch;
    if (options_.collate) {
      std::vector<std::vector<at::Tensor>> samples;
      for (int64_t i : plan_[index]) samples.push_back(dataset_->get(i));
      batch = options_.collate(samples);
    } else {
      batch = dataset_->get_batch(plan_[index]);
    }
    return to_device(std::move(batch));
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
    batch_handed_out(prefetcher_->consumed() == plan_.size());
    return batch;
  }
  // End of the epoch: the next call starts the following one.
  prefetcher_.reset();
  // PyTorch's RandomSampler, once its permutation is exhausted, draws one more for its (here empty)
  // tail, randperm(n)[:0]; the synchronized generator advances as Accelerate's does.
  if (generator_ && !options_.seed) permutation(dataset_->size(), *generator_);
  epoch_finished();
  return std::nullopt;
}

std::shared_ptr<DataLoader> make_data_loader(const std::shared_ptr<Dataset>& dataset,
                                             const std::shared_ptr<IterableSource>& stream, DataLoaderOptions options) {
  if (stream) return std::make_shared<IterableDataLoader>(stream, std::move(options), ShardOptions{});
  return std::make_shared<DataLoader>(dataset, std::move(options));
}

}  // namespace acc

#include "data/map_dataloader.h"

#include <algorithm>
#include <limits>

#include "common/checked_math.h"
#include "common/error.h"
#include "common/random.h"
#include "data/sampler.h"
#include "data/sharding.h"

namespace acc {

MapDataLoader::MapDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : DataLoader(std::move(options)), dataset_(std::move(dataset)) {
  require(dataset_ != nullptr, "the data loader needs a dataset");
  DataLoaderOptions& o = mutable_options();
  require(o.prefetch_factor >= 1, "prefetch_factor must be at least 1");
  if (o.generator.defined()) generator_ = o.generator;  // the sampler's too, as PyTorch's RandomSampler takes it
  if (!o.batches.empty()) {
    require(!o.shuffle && !o.drop_last, "a loader over given batches cannot shuffle or drop_last",
            " (the batch sampler decides both)");
    const int64_t n = dataset_->size();
    for (size_t b = 0; b < o.batches.size(); ++b) {
      require(!o.batches[b].empty(), "batch ", b, " of the batch sampler is empty");
      for (int64_t i : o.batches[b])
        require(i >= 0 && i < n, "batch ", b, " holds index ", i, ", outside the dataset of ", n, " samples");
    }
    // A standard batch sampler: every batch of one size, the last one possibly shorter.
    const size_t first = o.batches.front().size();
    for (size_t b = 0; b < o.batches.size(); ++b) {
      const size_t size = o.batches[b].size();
      if (size != first && !(b + 1 == o.batches.size() && size < first)) variable_batches_ = true;
    }
    o.batch_size = static_cast<int64_t>(first);
  }
}

int64_t MapDataLoader::samples_per_epoch() const {
  if (options().batches.empty()) return dataset_->size();
  int64_t total = 0;
  for (const auto& batch : options().batches) total += static_cast<int64_t>(batch.size());
  return total;
}

std::vector<std::vector<int64_t>> MapDataLoader::unshuffled_batches() const {
  if (!options().batches.empty()) return options().batches;
  return make_batches(epoch_order(dataset_->size(), false, std::nullopt, 0), options().batch_size, options().drop_last);
}

int64_t MapDataLoader::length() const {
  if (!options().batches.empty()) return static_cast<int64_t>(options().batches.size());
  const int64_t n = dataset_->size(), b = options().batch_size;
  return options().drop_last ? n / b : ceil_div(n, b);
}

int64_t MapDataLoader::remainder() const {
  if (!options().batches.empty()) return -1;  // one process: nothing is padded
  return options().drop_last ? -1 : dataset_->size() % options().batch_size;
}

int64_t MapDataLoader::position() const {
  return in_epoch() && prefetcher_ ? skipped_ + static_cast<int64_t>(prefetcher_->consumed()) : 0;
}

void MapDataLoader::fetch_one_ahead() {
  require(!in_epoch(), "a loader's look-ahead can only change between epochs");
  one_ahead_ = true;
}

std::vector<uint8_t> MapDataLoader::first_batch_random_state() const {
  if (!in_epoch() || !prefetcher_ || !prefetcher_->first_random_state().defined()) return {};
  return generator_state_bytes(prefetcher_->first_random_state());
}

LoaderState MapDataLoader::state() const {
  LoaderState state = DataLoader::state();
  // A done epoch's state is the next one's start, whose seed is drawn when it starts.
  if (!epoch_done()) {
    state.epoch_seed = in_epoch() ? epoch_seed_ : resume_seed_;
    if (!in_epoch()) {
      state.worker_states = resume_worker_states_;
      state.next_batch_random_state = resume_next_batch_random_state_;
    } else if (prefetcher_) {
      for (const auto& worker : prefetcher_->next_worker_states())
        state.worker_states.push_back(generator_state_bytes(worker));
      if (const at::Tensor ahead = prefetcher_->ahead_random_state(); ahead.defined())
        state.next_batch_random_state = generator_state_bytes(ahead);
    }
  }
  if (!generator_) return state;
  if (!in_epoch() && !resume_generator_state_.empty()) {
    state.generator_state = resume_generator_state_;
    return state;
  }
  at::Tensor bytes = in_epoch() ? epoch_start_generator_state_ : generator_->get_state();
  if (epoch_done() && tail_taken_) {
    bytes = generator_->get_state();
  } else if (epoch_done()) {
    // The generator as the next epoch finds it: after the tail draw that ending this one at the next
    // call takes (take_tail_draw), taken here on the generator and undone (libtorch 1.13's clone leaks).
    at::Generator generator = *generator_;
    const at::Tensor now = generator.get_state();
    try {
      take_tail_draw();
    } catch (...) {
      generator.set_state(now);
      throw;
    }
    bytes = generator.get_state();
    generator.set_state(now);
  }
  state.generator_state = generator_state_bytes(bytes);
  return state;
}

std::vector<uint8_t> MapDataLoader::epoch_generator_state() const {
  if (!epoch_start_generator_state_.defined()) return {};
  return generator_state_bytes(epoch_start_generator_state_);
}

void MapDataLoader::check_generator_state(const std::vector<uint8_t>& bytes) const {
  if (!generator_) return DataLoader::check_generator_state(bytes);
  check_cpu_generator_state(bytes, "the saved shuffle generator state");
}

void MapDataLoader::check_worker_states(const std::vector<std::vector<uint8_t>>& states) const {
  require(states.size() == options().num_workers, "the saved loader fetched on ", states.size(),
          " worker threads, this one has num_workers ", options().num_workers,
          " (create it as it was saved, for the same random numbers in its workers)");
  for (size_t w = 0; w < states.size(); ++w)
    check_cpu_generator_state(states[w], "the saved state of worker " + std::to_string(w));
}

void MapDataLoader::check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const {
  require(options().num_workers == 0, "the saved loader fetched its batches on the calling thread, this one on ",
          options().num_workers, " worker threads (create it as it was saved, num_workers 0, for the same random ",
          "numbers in its batches)");
  check_cpu_generator_state(bytes, what);
}

void MapDataLoader::load_state(const LoaderState& state) {
  DataLoader::load_state(state);
  resume_seed_ = state.epoch_seed;
  resume_generator_state_ = state.generator_state;
  resume_worker_states_ = state.position > 0 ? state.worker_states : std::vector<std::vector<uint8_t>>{};
  resume_next_batch_random_state_ = state.next_batch_random_state;
}

void MapDataLoader::drop_loaded_resume() {
  DataLoader::drop_loaded_resume();
  // The epoch named instead shuffles with its own seed (seed + epoch); a generator of the loader's
  // own keeps its restored state, as PyTorch's set_epoch leaves a generator alone.
  resume_seed_.reset();
  resume_worker_states_.clear();
  resume_next_batch_random_state_.clear();
}

std::vector<at::Generator> MapDataLoader::epoch_workers(uint64_t base_seed) {
  std::vector<at::Generator> workers;
  for (size_t w = 0; w < options().num_workers; ++w) {
    workers.push_back(worker_generator(base_seed, w));
    if (w < resume_worker_states_.size()) workers.back().set_state(generator_state_tensor(resume_worker_states_[w]));
  }
  resume_worker_states_.clear();
  return workers;
}

void MapDataLoader::abandon_epoch() {
  // A loop left early leaves the sampler where the calls so far took it (take_tail_draw_by).
  prefetcher_.reset();
  plan_.clear();
}

void MapDataLoader::take_tail_draw() const {
  // PyTorch's RandomSampler, once its permutation is exhausted, draws one more for its (here empty)
  // tail, randperm(n)[:0]; the synchronized generator advances as Accelerate's does.
  if (!shuffles_with_generator()) return;
  at::Generator generator = *generator_;
  permutation(dataset_->size(), generator);
}

int64_t MapDataLoader::sampler_tail_request() const { return dataset_->size() / options().batch_size; }

int64_t MapDataLoader::tail_call() const {
  // Asked for batch `request`, PyTorch's iterator asks its batch sampler for it: without workers
  // in the next() that returns that batch; with them, the first prefetch_factor * num_workers
  // requests when the iterator starts, each later one as the batch that many before it is returned.
  // A prepared loader asks its iterator for each batch one call before it hands it out.
  const int64_t request = sampler_tail_request();
  const auto early = static_cast<int64_t>(options().prefetch_factor * options().num_workers);
  if (early > 0 && request < early) return 0;
  return std::max<int64_t>(request - early - (one_ahead_ ? 1 : 0), 0);
}

void MapDataLoader::take_tail_draw_by(int64_t call) {
  if (tail_taken_ || call < tail_call()) return;
  take_tail_draw();
  tail_taken_ = true;
}

void MapDataLoader::synchronize_shuffle(std::function<void(at::Generator&)> synchronize) {
  require(!in_epoch(), "the shuffle can only change between epochs");
  require(options().shuffle && !options().seed, "a synchronized shuffle is for a shuffling loader without a seed");
  require(static_cast<bool>(synchronize), "synchronize_shuffle needs a function");
  // Accelerate seeds the sampler a generator from torch's only when it has none (the loader's own).
  if (!generator_) generator_ = seeded_generator(draw_seed());
  synchronize_ = std::move(synchronize);
}

std::vector<std::vector<int64_t>> MapDataLoader::plan_epoch(int64_t) const {
  if (!options().batches.empty()) return options().batches;
  return make_batches(options().shuffle ? order_ : epoch_order(dataset_->size(), false, std::nullopt, 0),
                      options().batch_size, options().drop_last);
}

void MapDataLoader::restore_generator() {
  if (!generator_) return;
  if (!resume_generator_state_.empty()) {
    generator_->set_state(generator_state_tensor(resume_generator_state_));
    resume_generator_state_.clear();
  }
  if (synchronize_) synchronize_(*generator_);
}

void MapDataLoader::shuffle_epoch() {
  order_.clear();
  epoch_seed_.reset();
  if (generator_) epoch_start_generator_state_ = generator_->get_state();
  if (!options().shuffle) return;
  const int64_t n = dataset_->size();
  if (shuffles_with_generator()) {  // a seed from an older checkpoint takes precedence
    order_ = permutation(n, *generator_);
  } else {
    epoch_seed_ = resume_seed_ ? *resume_seed_ : epoch_generator_seed(options().seed, epoch());
    order_ = permutation(n, *epoch_seed_);
  }
  resume_seed_.reset();
}

void MapDataLoader::draw_at_iterator_creation() {
  order_drawn_ = options().num_workers > 0;
  if (order_drawn_) shuffle_epoch();
}

void MapDataLoader::start_epoch() {
  prefetcher_.reset();
  // PyTorch's order: Accelerate synchronizes the generator, the iterator then draws its base seed
  // (from the loader's own generator, if it has one), and the sampler its order.
  restore_generator();
  const bool order_drawn = std::exchange(order_drawn_, false) && iterator_created();
  const uint64_t base_seed = take_iterator_draw();
  if (!order_drawn) shuffle_epoch();
  plan_ = plan_epoch(epoch());
  tail_taken_ = false;
  const auto skip = static_cast<size_t>(std::min<int64_t>(take_skip_batches(), static_cast<int64_t>(plan_.size())));
  plan_.erase(plan_.begin(), plan_.begin() + static_cast<std::ptrdiff_t>(skip));
  skipped_ = static_cast<int64_t>(skip);
  auto fetch = [this](size_t index) {
    const auto running = running_callbacks();  // on this thread, a worker's or the caller's
    std::vector<at::Tensor> batch;
    if (options().collate) {
      std::vector<std::vector<at::Tensor>> samples;
      for (int64_t i : plan_[index]) samples.push_back(dataset_->get(i));
      batch = options().collate(samples);
    } else {
      batch = dataset_->get_batch(plan_[index]);
    }
    return to_device(std::move(batch));
  };
  if (options().num_workers > 0) {
    prefetcher_ = std::make_unique<Prefetcher>(plan_.size(), fetch, epoch_workers(base_seed),
                                               options().prefetch_factor * options().num_workers);
  } else {
    Prefetcher::OnConsumerThread how{one_ahead_, {}, skipped_ > 0};
    if (!resume_next_batch_random_state_.empty())
      how.first_fetch_random_state = generator_state_tensor(resume_next_batch_random_state_);
    resume_next_batch_random_state_.clear();
    prefetcher_ = std::make_unique<Prefetcher>(plan_.size(), fetch, std::move(how));
  }
  begin_epoch();
}

std::optional<std::vector<at::Tensor>> MapDataLoader::next() {
  refuse_from_callbacks("next");
  if (take_empty_pass()) return std::nullopt;
  if (!in_epoch()) start_epoch();
  // This call is the epoch's position()-th (counting the batches a resumed epoch skipped).
  take_tail_draw_by(position());
  std::vector<at::Tensor> batch;
  if (prefetcher_->next(batch)) {
    batch_handed_out(prefetcher_->consumed() == plan_.size());
    return batch;
  }
  // End of the epoch: the next call starts the following one.
  prefetcher_.reset();
  take_tail_draw_by(std::numeric_limits<int64_t>::max());
  epoch_finished();
  return std::nullopt;
}

}  // namespace acc

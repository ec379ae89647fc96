#include "data/iterable_dataloader.h"

#include "common/checked_math.h"
#include "common/error.h"
#include "common/random.h"

namespace acc {

IterableDataLoader::IterableDataLoader(std::shared_ptr<IterableSource> source, DataLoaderOptions options,
                                       ShardOptions shard)
    : DataLoader(std::move(options)), source_(std::move(source)), shard_(shard) {
  require(source_ != nullptr, "the data loader needs a stream");
  require(this->options().batches.empty(), "a stream has no indices: batches need a map-style dataset");
  require(!this->options().shuffle, "an iterable dataset cannot be shuffled by the loader (shuffle it in the stream)");
  per_ = per_process_batch_size(this->options().batch_size, shard_.num_processes, shard_.split_batches);
}

int64_t IterableDataLoader::length() const {
  const int64_t n = source_->size_hint();
  if (n < 0) return -1;
  const bool drop = options().drop_last;
  // Every round of the stream gives each process one batch.
  const int64_t round = total_batch_size();
  return drop ? n / round : ceil_div(n, round);
}

std::optional<std::vector<at::Tensor>> IterableDataLoader::produce() {
  while (static_cast<int64_t>(ready_.size()) < per_ && !stream_done_) {
    auto sample = source_->next();
    if (!sample) {
      stream_done_ = true;
      if (sharder_) tail_real_ = sharder_->finish(ready_);
      break;
    }
    if (sharder_)
      sharder_->push(std::move(*sample), ready_);
    else
      ready_.push_back(std::move(*sample));
  }
  size_t take = std::min(ready_.size(), static_cast<size_t>(per_));
  if (take == 0 || (take < static_cast<size_t>(per_) && options().drop_last)) return std::nullopt;
  std::vector<Sample> samples(std::make_move_iterator(ready_.begin()),
                              std::make_move_iterator(ready_.begin() + static_cast<std::ptrdiff_t>(take)));
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(take));
  return to_device(options().collate ? options().collate(samples) : default_collate(samples));
}

void IterableDataLoader::abandon_epoch() {
  // The next epoch restarts the stream (start_epoch) and the sharder; what was read ahead is dropped.
  lookahead_.reset();
  looked_ahead_ = false;
  ready_.clear();
  sharder_.reset();
}

void IterableDataLoader::start_epoch() {
  take_iterator_draw();
  source_->start_epoch(epoch());
  ready_.clear();
  stream_done_ = false;
  tail_real_ = -1;
  position_ = 0;
  lookahead_.reset();
  looked_ahead_ = false;
  if (shard_.num_processes > 1)
    sharder_ = std::make_unique<IterableSharder<Sample>>(options().batch_size, options().drop_last,
                                                         shard_.num_processes, shard_.rank, shard_.split_batches);
  begin_epoch();  // in an epoch whose last batch is still to come
  read_epoch_start(take_skip_batches());
}

void IterableDataLoader::read_epoch_start(int64_t skip) {
  // A resumed epoch puts the loaded state back once it has read; a dispatching loader's base, given
  // only the first batch's state, reads on from it (its dispatcher puts the state back).
  const bool resumed = skip > 0 && !resume_ahead_state_.empty();
  const at::Tensor loaded = resumed ? global_random_state() : at::Tensor();
  if (!resume_first_state_.empty()) set_global_random_state(generator_state_tensor(resume_first_state_));
  first_read_state_ = global_random_state();
  for (; skip > 0 && produce(); --skip) ++position_;
  if (resumed) set_global_random_state(generator_state_tensor(resume_ahead_state_));
  if (prepared()) look_ahead();  // as DataLoaderShard: one batch ahead
  if (resumed) set_global_random_state(loaded);
  resume_first_state_.clear();
  resume_ahead_state_.clear();
}

std::vector<uint8_t> IterableDataLoader::first_batch_random_state() const {
  if (!in_epoch() || !first_read_state_.defined()) return {};
  return generator_state_bytes(first_read_state_);
}

void IterableDataLoader::look_ahead() {
  ahead_read_state_ = global_random_state();
  lookahead_ = produce();
  looked_ahead_ = true;
}

LoaderState IterableDataLoader::state() const {
  LoaderState state = DataLoader::state();
  if (!in_epoch()) {
    state.next_batch_random_state = resume_ahead_state_;
    state.first_batch_random_state = resume_first_state_;
  } else if (!epoch_done() && prepared() && looked_ahead_) {
    state.next_batch_random_state = generator_state_bytes(ahead_read_state_);
    state.first_batch_random_state = generator_state_bytes(first_read_state_);
  }
  return state;
}

void IterableDataLoader::load_state(const LoaderState& state) {
  DataLoader::load_state(state);
  // At position 0 the state of the next batch is the first batch's: the epoch is read from it on (a
  // dispatching loader's base reading a resumed epoch again).
  const bool mid_epoch = state.position > 0;
  resume_ahead_state_ = mid_epoch ? state.next_batch_random_state : std::vector<uint8_t>{};
  resume_first_state_ = mid_epoch ? state.first_batch_random_state : state.next_batch_random_state;
}

void IterableDataLoader::drop_loaded_resume() {
  DataLoader::drop_loaded_resume();
  resume_ahead_state_.clear();
  resume_first_state_.clear();
}

void IterableDataLoader::check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const {
  check_cpu_generator_state(bytes, what);
}

void IterableDataLoader::settle_end_of_epoch() {
  refuse_from_callbacks("end_of_epoch");  // it may read the stream
  if (looked_ahead_ || position_ == 0) return;
  const auto running = running_callbacks();
  look_ahead();
  if (!lookahead_) last_batch_found();
}

std::optional<std::vector<at::Tensor>> IterableDataLoader::next() {
  refuse_from_callbacks("next");
  if (take_empty_pass()) return std::nullopt;
  const auto running = running_callbacks();  // the stream's start, next and collate run here
  if (!in_epoch()) start_epoch();
  auto batch = looked_ahead_ ? std::move(lookahead_) : produce();
  lookahead_.reset();
  looked_ahead_ = false;
  if (!batch) {
    epoch_finished();
    return std::nullopt;
  }
  if (prepared()) look_ahead();  // as DataLoaderShard: one batch ahead
  ++position_;
  batch_handed_out(looked_ahead_ && !lookahead_);
  return batch;
}

}  // namespace acc

#include "data/dataloader.h"

#include <limits>

#include "common/error.h"
#include "common/random.h"

namespace acc {

DataLoader::DataLoader(DataLoaderOptions options) : options_(std::move(options)) {
  require(options_.batch_size >= 1, "batch_size must be at least 1, got ", options_.batch_size);
}

DataLoader::~DataLoader() {
  if (in_epoch_ && observer_) observer_->on_epoch_end(*this);
}

void DataLoader::batch_handed_out(bool last_of_epoch) {
  end_of_epoch_ = last_of_epoch;
  if (observer_) observer_->on_batch(*this, end_of_epoch_);
}

void DataLoader::end_epoch() {
  refuse_from_callbacks("end_epoch");
  created_iterator_seed_.reset();  // an iterator dropped before its first batch: its draws stay taken
  if (!in_epoch_) return;
  abandon_epoch();
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

void DataLoader::set_collate(CollateFn collate) {
  refuse_from_callbacks("set_collate");
  require(!in_epoch_, "the collate function can only change between epochs");
  options_.collate = std::move(collate);
}

void DataLoader::skip_first_batches(int64_t batches) {
  refuse_from_callbacks("skip_first_batches");
  require(!in_epoch_, "skip_first_batches applies to the next epoch: call it between epochs");
  require(batches >= 0, "cannot skip a negative number of batches (", batches, ")");
  // Restored at an epoch's start because the checkpoint came after the epoch before's last batch: a
  // loop that stays in that epoch and skips the batches it did (all of them, or more) asks for its
  // empty rest, as Python's skip over that epoch gives, not for the next epoch's batches to go
  // unseen. One empty pass, then that next epoch whole.
  const int64_t epoch_length = length();
  if (std::exchange(after_restored_epoch_end_, false) && epoch_length > 0 && batches >= epoch_length) {
    empty_pass_ = true;
    options_.skip_batches = 0;
    return;
  }
  options_.skip_batches = batches;
}

bool DataLoader::take_empty_pass() {
  after_restored_epoch_end_ = false;
  if (empty_pass_) loaded_epoch_.reset();
  return std::exchange(empty_pass_, false);
}

void DataLoader::require_epoch_can_start() const {
  // The last epoch an int64 counts has no successor.
  require(epoch_ < std::numeric_limits<int64_t>::max(), "epoch ", epoch_, " cannot start: it is the last an int64 ",
          "counter holds, and no epoch could follow it (set_epoch to a lower one)");
}

void DataLoader::create_iterator() {
  refuse_from_callbacks("creating an iterator");
  require(!in_epoch_, "an epoch is being iterated: end it (end_epoch) before creating another iterator");
  // Accelerate's iterators are generators; an epoch resumed by load_state took its draw before the
  // checkpoint.
  if (prepared_ || iterator_draw_taken_ || empty_pass_) return;
  require_epoch_can_start();
  created_iterator_seed_ = draw_iterator_base_seed(options_.base_seed_generator());
  draw_at_iterator_creation();
}

uint64_t DataLoader::take_iterator_draw() {
  // Every kind of loader starts its epoch here.
  require_epoch_can_start();
  loaded_epoch_.reset();
  if (created_iterator_seed_) {
    iterator_seed_ = std::exchange(created_iterator_seed_, std::nullopt);
  } else if (!std::exchange(iterator_draw_taken_, false)) {
    iterator_seed_ = draw_iterator_base_seed(options_.base_seed_generator());
  } else {
    // A checkpoint from before base seeds were saved does not know it: its workers start from 0.
    iterator_seed_ = std::exchange(resume_iterator_seed_, std::nullopt).value_or(0);
  }
  return *iterator_seed_;
}

void DataLoader::set_epoch(int64_t epoch) {
  refuse_from_callbacks("set_epoch");
  require(!in_epoch_, "set_epoch is only allowed between epochs");
  require(epoch >= 0, "epoch must not be negative, got ", epoch);
  require(epoch < std::numeric_limits<int64_t>::max(), "epoch must be below 2^63 - 1 (the next epoch follows it), got ",
          epoch);
  // A loaded state resumes its own epoch: naming another (Accelerate's set_epoch, whose load_state
  // does not restore loaders) starts that one whole, in its own order.
  if (loaded_epoch_ && *loaded_epoch_ != epoch) drop_loaded_resume();
  epoch_ = epoch;
  after_restored_epoch_end_ = empty_pass_ = false;  // the loop names its epoch itself
}

void DataLoader::drop_loaded_resume() {
  loaded_epoch_.reset();
  options_.skip_batches = 0;
  iterator_draw_taken_ = false;
  resume_iterator_seed_.reset();
}

LoaderState DataLoader::state() const {
  LoaderState state;
  state.seed = options_.seed;
  if (epoch_done()) {
    // The next batch an uninterrupted run sees is the next epoch's first: resume there (the epoch
    // counter a loop keeps by itself then agrees with the loader's).
    state.epoch = epoch_ + 1;
    return state;
  }
  state.epoch = epoch_;
  // Between epochs a loaded state may still be pending: it is the state until the epoch starts.
  state.position = in_epoch_ ? position() : options_.skip_batches;
  state.iterator_seed = in_epoch_ ? iterator_seed_ : iterator_draw_taken_ ? resume_iterator_seed_ : std::nullopt;
  return state;
}

void DataLoader::check_state(const LoaderState& state) const {
  refuse_from_callbacks("loading a data loader's state");  // a checkpoint's load asks before any change
  require(state.epoch >= 0 && state.position >= 0, "a loader state has a negative epoch or position");
  require(state.epoch < std::numeric_limits<int64_t>::max(), "a loader state's epoch (", state.epoch,
          ") is the last an int64 counts: no epoch can start there");
  const int64_t batches = length();
  require(batches < 0 || state.position <= batches, "a loader state's position (", state.position,
          ") is past the end of an epoch of ", batches, " batches");
  if (state.layout) {  // a position means the same batches only in an epoch of the same layout
    const LoaderState::Layout& saved = *state.layout;
    const LoaderState::Layout now{batches, total_batch_size(), total_dataset_length()};
    require(saved == now, "the checkpoint's loader had epochs of ", saved.batches, " batches of ", saved.batch_size,
            " samples over all processes from a dataset of ", saved.samples, "; this one has ", now.batches,
            " batches of ", now.batch_size, " from ", now.samples,
            " (-1: unknown): its position would resume other samples; create and prepare the loader as it was "
            "saved");
  }
  require(state.unread_skip >= 0 && state.unread_skip <= state.position, "a loader state's unread skip (",
          state.unread_skip, ") is not between 0 and its position (", state.position, ")");
  if (!state.generator_state.empty()) check_generator_state(state.generator_state);
  if (!state.worker_states.empty()) check_worker_states(state.worker_states);
  if (!state.next_batch_random_state.empty())
    check_fetch_random_state(state.next_batch_random_state, "the saved random state of the loader's next batch");
  if (!state.first_batch_random_state.empty())
    check_fetch_random_state(state.first_batch_random_state, "the saved random state of the epoch's first batch");
}

void DataLoader::check_generator_state(const std::vector<uint8_t>&) const {
  fail(Status::InvalidArgument, "the saved loader drew from a generator of its own (generator_seed) or shuffled ",
       "with a generator synchronized across processes, this one has neither (create and prepare it as it was)");
}

void DataLoader::check_worker_states(const std::vector<std::vector<uint8_t>>& states) const {
  fail(Status::InvalidArgument, "the saved loader fetched on ", states.size(), " worker threads, this kind of loader ",
       "has none (resume with the loader that was saved: a map-style dataset's)");
}

void DataLoader::check_fetch_random_state(const std::vector<uint8_t>&, const std::string&) const {
  fail(Status::InvalidArgument, "the saved loader had fetched its next batch ahead (a prepared loader over a ",
       "map-style dataset), this kind of loader does not (resume with the loader that was saved)");
}

void DataLoader::load_state(const LoaderState& state) {
  refuse_from_callbacks("loading a data loader's state");
  require(!in_epoch_, "a data loader's state can only be loaded between epochs (before iterating)");
  check_state(state);
  set_epoch(state.epoch);
  skip_first_batches(state.position);
  after_restored_epoch_end_ = state.position == 0 && state.epoch > 0;
  iterator_draw_taken_ = state.position > 0;
  created_iterator_seed_.reset();
  resume_iterator_seed_ = iterator_draw_taken_ ? state.iterator_seed : std::nullopt;
  if (state.seed) options_.seed = state.seed;
  loaded_epoch_ = state.epoch;
}

}  // namespace acc

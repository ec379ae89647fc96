// What every kind of data loader shares: the epoch and the position in it, skip_first_batches,
// checkpoint state, collate and device placement of batches, the observer that hears of each batch.
// The kinds, one per file: map_dataloader.h (a map-style dataset; sharded_dataloader.h derives
// from it), iterable_dataloader.h (a stream) and dispatcher.h (process 0 reads, all get slices).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/own_callbacks.h"
#include "data/dataloader_options.h"
#include "data/loader_observer.h"

namespace acc {

// Where a loader stands, for checkpoints: its epoch, the batches of it already handed out, and what
// gives the epoch's shuffle: the seed drawn when the epoch started (a loader without a seed of its
// own), or the synchronized generator's state at the epoch's start (see synchronize_shuffle).
// In the middle of an epoch, also what its worker threads draw from: the base seed its iterator drew
// (draw_iterator_base_seed) and, for a map-style loader with workers, each worker generator's state,
// starting with the worker of the next batch (Prefetcher::next_worker_states); for one without
// workers that fetched the next batch ahead, torch's global generator's state that batch was
// fetched under (Prefetcher::ahead_random_state), which a state with position 0 gives the first.
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;
  std::optional<uint64_t> epoch_seed;
  std::optional<uint64_t> seed;         // the loader's own shuffle seed, if it has one
  std::vector<uint8_t> generator_state;  // empty without a synchronized generator
  std::optional<uint64_t> iterator_seed;
  std::vector<std::vector<uint8_t>> worker_states;
  std::vector<uint8_t> next_batch_random_state;
  // A dispatching loader's: the state its epoch's first batch was read under (the last batch is
  // padded with that batch's first samples).
  std::vector<uint8_t> first_batch_random_state;
  // A dispatching loader's: how many of `position` were skipped at the epoch's start without being
  // read (skip_first_batches over a map-style dataset, as Accelerate's sampler skips them).
  int64_t unread_skip = 0;
  // The epoch the state is a position in, when it was saved: batches (length()), samples over all
  // processes per step (total_batch_size()) and in the dataset (total_dataset_length()); -1 where
  // unknown. Unset in checkpoints written before it was kept.
  struct Layout {
    int64_t batches = -1, batch_size = -1, samples = -1;
    bool operator==(const Layout& other) const {
      return batches == other.batches && batch_size == other.batch_size && samples == other.samples;
    }
  };
  std::optional<Layout> layout;
};

class DataLoader {
 public:
  // A loader dropped in the middle of an epoch is no longer iterated: the observer hears its end.
  virtual ~DataLoader();

  // The next batch of the current epoch, or nullopt at its end; the call after the end starts the
  // next epoch.
  virtual std::optional<std::vector<at::Tensor>> next() = 0;
  // Batches in an epoch (-1 when unknown).
  virtual int64_t length() const = 0;
  // Samples per step over all processes (Accelerate's total_batch_size) and in the dataset (-1 unknown).
  virtual int64_t total_batch_size() const { return options_.batch_size; }
  virtual int64_t total_dataset_length() const = 0;
  // Accelerate's remainder: real samples in the epoch's last round of batches over all processes
  // (the rest repeats earlier samples); -1 when nothing is padded or it is unknown.
  virtual int64_t remainder() const = 0;
  // The epoch being iterated (or the next one, between epochs).
  int64_t epoch() const { return epoch_; }
  // Sets the epoch the next iteration uses (its shuffle order); only between epochs.
  void set_epoch(int64_t epoch);
  // Batches handed out in the current epoch.
  virtual int64_t position() const = 0;
  // Whether the last batch handed out was the last of its epoch. A loader that reads only when asked
  // (a stream not prepared) reads the next batch ahead to answer.
  bool end_of_epoch() {
    if (in_epoch_ && !end_of_epoch_) settle_end_of_epoch();
    return end_of_epoch_;
  }
  // Ends the epoch being iterated before its last batch (a loop left early, as a Python iterator
  // that is dropped): the batches fetched ahead are dropped, the epoch counts as done (the next
  // call to next() starts the following one) and the observer hears of its end. Does nothing
  // between epochs.
  void end_epoch();
  // Whether an epoch has begun and not ended.
  bool in_epoch() const { return in_epoch_; }
  // What creating a Python iterator over the loader (iter(loader)) does before its first batch, so
  // that loaders read in step (zip) draw from torch's global generator in Python's order: a loader
  // not prepared takes its iterator's base-seed draw now instead of at the epoch's first next()
  // (with workers also its shuffle, which PyTorch's worker iterator asks its sampler for at once);
  // a prepared loader's iterator (Accelerate's is a generator) does nothing before its first batch.
  // Only between epochs; called again before the first batch, it draws again (a second iterator).
  // end_epoch between epochs drops what it drew, as a dropped iterator.
  void create_iterator();
  // The loader was made by prepare_data_loader (Accelerate's loaders: see create_iterator).
  void mark_prepared() { prepared_ = true; }
  bool prepared() const { return prepared_; }
  // Whether the epoch's last batch has been handed out, the epoch ending at the next call.
  bool epoch_done() const { return in_epoch_ && end_of_epoch_; }
  // Checkpointing: the state, and resuming from one (only between epochs, e.g. before the first
  // batch): the next batch is the one after `position` in `epoch`, in the same order. Once an
  // epoch's last batch is out (epoch_done), the state is the next epoch's start.
  virtual LoaderState state() const;
  virtual void load_state(const LoaderState& state);
  // Whether load_state would take `state` (an InvalidArgument error saying why not).
  void check_state(const LoaderState& state) const;
  // A saved state of torch's global generator to fetch a batch under (check_state; `what` names it):
  // refused by loaders that do not fetch map-style batches on the calling thread.
  virtual void check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const;
  // For a loader that reads on the calling thread, in an epoch whose first batch was read: torch's
  // global generator's state it was read under (empty otherwise). A state loaded with position 0 and
  // that state reads the epoch from it on (a dispatching loader's base, reading a resumed epoch again).
  virtual std::vector<uint8_t> first_batch_random_state() const { return {}; }
  // The generator seed of the last epoch started's shuffle (none without shuffling or before one).
  virtual std::optional<uint64_t> epoch_seed() const { return std::nullopt; }
  // The base seed the last epoch started drew (take_iterator_draw; none before one).
  std::optional<uint64_t> iterator_seed() const { return iterator_seed_; }
  // The state of the generator the last epoch started shuffled with, as that epoch found it after its
  // base seed was drawn (empty without such a generator or before an epoch).
  virtual std::vector<uint8_t> epoch_generator_state() const { return {}; }

  const DataLoaderOptions& options() const { return options_; }
  // Only between epochs (before the first batch of one).
  void set_collate(CollateFn collate);
  // The next epoch starts after its first `batches` batches (Accelerate's skip_first_batches), e.g.
  // to resume in the middle of an epoch; later epochs start from their beginning. On a loader
  // restored at the start of an epoch (the checkpoint followed the last batch of the one before),
  // skipping `length()` batches or more means the rest of that earlier epoch: the next iteration is
  // empty (take_empty_pass), and the one after is the restored epoch, whole.
  void skip_first_batches(int64_t batches);
  void set_observer(std::shared_ptr<LoaderObserver> observer) { observer_ = std::move(observer); }
  // The next epoch was begun before a checkpoint (load_state in the middle of it): the draw from
  // torch's global generator that starting it takes (draw_iterator_base_seed) was taken then, and
  // the restored random state comes after it, so it is not taken again (exact resume); the epoch's
  // workers are seeded from what it drew, `iterator_seed`.
  void resume_started_epoch(std::optional<uint64_t> iterator_seed) {
    iterator_draw_taken_ = true;
    resume_iterator_seed_ = iterator_seed;
  }
  // This loader reads for `wrapper` (a dispatching loader's base): its callbacks, on whichever thread
  // they run, count as the wrapper's too, so a call into the wrapper from one is refused.
  void serve(const DataLoader& wrapper) { served_ = &wrapper; }
  // Where batches go (only between epochs).
  void set_device_option(std::optional<c10::Device> device) {
    refuse_from_callbacks("setting a data loader's device");
    require(!in_epoch_, "the device can only change between epochs");
    options_.device = device;
  }

 protected:
  explicit DataLoader(DataLoaderOptions options);

  // Refuses `call` on a thread inside a callback (a dataset's function) that this loader runs: it
  // would change the epoch that callback serves (see own_callbacks.h).
  void refuse_from_callbacks(const char* call) const { refuse_inside_own_callbacks(owner(), "data loader", call); }
  // While it lives, this thread runs this loader's callbacks (a fetch, on any thread), which are
  // also those of the loader it serves (serve).
  OwnCallbacksRunning running_callbacks() const { return OwnCallbacksRunning(owner(), served_); }

  // Bookkeeping shared by every kind of loader.
  void batch_handed_out(bool last_of_epoch);
  void epoch_finished();
  // In an epoch whose last batch is still to come.
  void begin_epoch() {
    in_epoch_ = true;
    end_of_epoch_ = false;
  }
  std::vector<at::Tensor> to_device(std::vector<at::Tensor> batch) const;
  // The batches to skip at the start of this epoch (skip_first_batches), cleared for the next.
  int64_t take_skip_batches() { return std::exchange(options_.skip_batches, 0); }
  // Whether this next() is skip_first_batches' empty pass (it then returns the end at once and
  // starts nothing); each kind of loader asks first.
  bool take_empty_pass();
  // For a kind of loader that does not know whether the batch handed out last was its epoch's last
  // (end_of_epoch): finds out, then says so with last_batch_found.
  virtual void settle_end_of_epoch() {}
  void last_batch_found() { end_of_epoch_ = true; }
  // What a kind of loader drops when its epoch is ended early (end_epoch), before the epoch ends.
  virtual void abandon_epoch() {}
  // At the start of an epoch: torch's iterator draw (see draw_iterator_base_seed), unless resumed or
  // taken by create_iterator; the epoch's base seed, drawn, taken before or resumed. Refuses to start
  // the epoch 2^63 - 1, which no epoch could follow.
  uint64_t take_iterator_draw();
  // Whether this epoch's iterator draws were taken before a checkpoint it resumes from (not again).
  bool resumes_started_epoch() const { return iterator_draw_taken_; }
  // Whether create_iterator took this epoch's draws (its epoch not started yet).
  bool iterator_created() const { return created_iterator_seed_.has_value(); }
  // What a kind of loader draws when its iterator is created, after the base seed (create_iterator).
  virtual void draw_at_iterator_creation() {}
  // What a loaded state kept to resume its epoch goes (its position, its draws, a kind's seeds and
  // random states): set_epoch named another epoch before that one started, which starts whole.
  virtual void drop_loaded_resume();
  // A saved shuffle generator's state (check_state): refused by loaders without such a generator.
  virtual void check_generator_state(const std::vector<uint8_t>& bytes) const;
  // Saved worker generator states (check_state): refused by loaders without worker threads.
  virtual void check_worker_states(const std::vector<std::vector<uint8_t>>& states) const;
  // For a kind of loader that settles its options once constructed (a batch sampler's batch size).
  DataLoaderOptions& mutable_options() { return options_; }

 private:
  const void* owner() const { return static_cast<const DataLoader*>(this); }
  void require_epoch_can_start() const;

  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  bool in_epoch_ = false;
  bool end_of_epoch_ = false;
  bool iterator_draw_taken_ = false;  // resume_started_epoch
  bool prepared_ = false;
  std::optional<uint64_t> created_iterator_seed_;  // create_iterator's draw, until its epoch starts
  std::optional<uint64_t> iterator_seed_;         // the epoch's base seed (take_iterator_draw)
  std::optional<uint64_t> resume_iterator_seed_;  // the resumed epoch's, from load_state
  bool after_restored_epoch_end_ = false;         // loaded at an epoch's start, nothing iterated since
  std::optional<int64_t> loaded_epoch_;           // a loaded state's epoch, until it starts
  bool empty_pass_ = false;                       // see skip_first_batches
  std::shared_ptr<LoaderObserver> observer_;
  const DataLoader* served_ = nullptr;
};

}  // namespace acc

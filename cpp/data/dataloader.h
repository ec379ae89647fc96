// A data loader over a map-style dataset: batches in sequential or shuffled order, drop_last,
// batches fetched ahead on background threads and placed on a device. The base of the sharded
// loader (sharded_dataloader.h) and the stream loader (iterable_dataloader.h).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/options.h"
#include "data/callback_dataset.h"
#include "data/dataloader_options.h"
#include "data/dataset.h"
#include "data/iterable.h"
#include "data/loader_observer.h"
#include "data/prefetcher.h"
#include "data/sharding.h"

namespace acc {

// Where a loader stands, for checkpoints: its epoch, the batches of it already handed out, and what
// gives the epoch's shuffle: the seed drawn when the epoch started (a loader without a seed of its
// own), or the synchronized generator's state at the epoch's start (see synchronize_shuffle).
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;
  std::optional<uint64_t> epoch_seed;
  std::optional<uint64_t> seed;         // the loader's own shuffle seed, if it has one
  std::vector<uint8_t> generator_state;  // empty without a synchronized generator
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options);
  virtual ~DataLoader() = default;

  // The next batch of the current epoch, or nullopt at its end; the call after the end starts the
  // next epoch.
  virtual std::optional<std::vector<at::Tensor>> next();
  // Batches in an epoch.
  virtual int64_t length() const;
  // Whether batches come from a batch sampler whose sizes vary (Accelerate's batch_size None).
  bool variable_batches() const { return variable_batches_; }
  // Samples in an epoch before sharding (the dataset's size, or the batch sampler's total).
  int64_t samples_per_epoch() const;
  // Samples per step over all processes (Accelerate's total_batch_size) and in the dataset (-1 unknown).
  virtual int64_t total_batch_size() const { return options_.batch_size; }
  virtual int64_t total_dataset_length() const { return dataset_ ? dataset_->size() : -1; }
  // Accelerate's remainder: real samples in the epoch's last round of batches over all processes
  // (the rest repeats earlier samples); -1 when nothing is padded or it is unknown.
  virtual int64_t remainder() const;
  // The epoch being iterated (or the next one, between epochs).
  int64_t epoch() const { return epoch_; }
  // Sets the epoch the next iteration uses (its shuffle order); only between epochs.
  void set_epoch(int64_t epoch);
  // Batches handed out in the current epoch.
  virtual int64_t position() const;
  // Whether the last batch handed out was the last of its epoch.
  bool end_of_epoch() const { return end_of_epoch_; }
  // Ends the epoch being iterated before its last batch (a loop left early, as a Python iterator
  // that is dropped): the batches fetched ahead are dropped, the epoch counts as done (the next
  // call to next() starts the following one) and the observer hears of its end. Does nothing
  // between epochs.
  void end_epoch();
  // Whether an epoch has begun and not ended.
  bool in_epoch() const { return in_epoch_; }
  // Checkpointing: the state, and resuming from one (only between epochs, e.g. before the first
  // batch): the next batch is the one after `position` in `epoch`, in the same order.
  virtual LoaderState state() const;
  virtual void load_state(const LoaderState& state);
  // Whether load_state would take `state` (an InvalidArgument error saying why not).
  void check_state(const LoaderState& state) const;
  // The generator seed of the last epoch started's shuffle (none without shuffling or before one).
  std::optional<uint64_t> epoch_seed() const { return epoch_seed_; }

  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  // Only between epochs (before the first batch of one).
  void set_collate(CollateFn collate);
  // The next epoch starts after its first `batches` batches (Accelerate's skip_first_batches), e.g.
  // to resume in the middle of an epoch; later epochs start from their beginning.
  void skip_first_batches(int64_t batches);
  void set_observer(std::shared_ptr<LoaderObserver> observer) { observer_ = std::move(observer); }
  // The next epoch was begun before a checkpoint (load_state in the middle of it): the draw from
  // torch's global generator that starting it takes (draw_iterator_base_seed) was taken then, and
  // the restored random state comes after it, so it is not taken again (exact resume).
  void resume_started_epoch() { iterator_draw_taken_ = true; }
  // Where batches go (only between epochs).
  void set_device_option(std::optional<c10::Device> device) {
    require(!in_epoch_, "the device can only change between epochs");
    options_.device = device;
  }

 protected:
  // For loaders without a map-style dataset (streams).
  explicit DataLoader(DataLoaderOptions options);
  // An epoch's batches before sharding, in sequential order (for lengths, which do not depend on order).
  std::vector<std::vector<int64_t>> unshuffled_batches() const;
  // The batches (dataset indices) of the epoch being started (shuffled with epoch_seed()); the
  // sharding of later layers overrides this.
  virtual std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const;

  // Accelerate's shuffle for a loader without a seed on several processes: one generator, seeded
  // once from torch's default generator; at the start of every epoch `synchronize` replaces its
  // state with process 0's, then the epoch's permutation advances it.
  void synchronize_shuffle(std::function<void(at::Generator&)> synchronize);

  // Bookkeeping shared by every kind of loader.
  void batch_handed_out(bool last_of_epoch);
  void epoch_finished();
  void set_in_epoch(bool in_epoch) { in_epoch_ = in_epoch; }
  std::vector<at::Tensor> to_device(std::vector<at::Tensor> batch) const;
  // The batches to skip at the start of this epoch (skip_first_batches), cleared for the next.
  int64_t take_skip_batches() { return std::exchange(options_.skip_batches, 0); }
  // What a kind of loader drops when its epoch is ended early (end_epoch), before the epoch ends.
  virtual void abandon_epoch() {}
  // At the start of an epoch: torch's iterator draw (see draw_iterator_base_seed), unless resumed.
  void take_iterator_draw();

 private:
  void start_epoch();
  // The epoch's sample order when shuffling (order_), and the seed or generator state that gives it.
  void shuffle_epoch();

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  bool in_epoch_ = false;
  bool end_of_epoch_ = false;
  bool variable_batches_ = false;
  std::optional<uint64_t> epoch_seed_;
  std::optional<uint64_t> resume_seed_;  // from load_state: the next epoch's seed, not drawn again
  std::optional<at::Generator> generator_;  // synchronize_shuffle's generator
  std::function<void(at::Generator&)> synchronize_;
  at::Tensor epoch_start_generator_state_;       // its state before this epoch's permutation
  std::vector<uint8_t> resume_generator_state_;  // from load_state
  std::vector<int64_t> order_;                   // the epoch's shuffled sample order
  int64_t skipped_ = 0;                          // batches skip_first_batches dropped from this epoch
  bool iterator_draw_taken_ = false;             // resume_started_epoch
  std::vector<std::vector<int64_t>> plan_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::shared_ptr<LoaderObserver> observer_;
};

struct ShardOptions {
  int64_t num_processes = 1;
  int64_t rank = 0;
  bool split_batches = false;  // each batch is cut into per-process slices (batch_size is global)
  bool even_batches = true;    // the last round is completed from the epoch's start
  // For a shuffle without a seed: sets a generator to process 0's state (see synchronize_shuffle).
  std::function<void(at::Generator&)> synchronize_generator;
};

// A loader over a map-style dataset, or over a stream when `stream` is set (one process's view).
std::shared_ptr<DataLoader> make_data_loader(const std::shared_ptr<Dataset>& dataset,
                                             const std::shared_ptr<IterableSource>& stream, DataLoaderOptions options);

}  // namespace acc

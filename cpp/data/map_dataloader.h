// A data loader over a map-style dataset: batches in sequential or shuffled order (or a batch
// sampler's), drop_last, batches fetched ahead on background threads and placed on a device. The
// base of the sharded loader (sharded_dataloader.h).
#pragma once

#include <ATen/core/Generator.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/prefetcher.h"

namespace acc {

class MapDataLoader : public DataLoader {
 public:
  MapDataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options);

  std::optional<std::vector<at::Tensor>> next() override;
  int64_t length() const override;
  int64_t total_dataset_length() const override { return dataset_->size(); }
  int64_t remainder() const override;
  int64_t position() const override;
  LoaderState state() const override;
  void load_state(const LoaderState& state) override;
  std::optional<uint64_t> epoch_seed() const override { return epoch_seed_; }
  std::vector<uint8_t> epoch_generator_state() const override;

  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  // Whether batches come from a batch sampler whose sizes vary (Accelerate's batch_size None).
  bool variable_batches() const { return variable_batches_; }
  void check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const override;
  // Samples in an epoch before sharding (the dataset's size, or the batch sampler's total).
  int64_t samples_per_epoch() const;
  // Without workers, fetch each batch before handing out the one before it, as Accelerate's
  // prepared loader (DataLoaderShard) iterates; only between epochs.
  void fetch_one_ahead();
  // Without workers (see DataLoader).
  std::vector<uint8_t> first_batch_random_state() const override;

 protected:
  // An epoch's batches before sharding, in sequential order (for lengths, which do not depend on order).
  std::vector<std::vector<int64_t>> unshuffled_batches() const;
  // The batches (dataset indices) of the epoch being started (shuffled with epoch_seed()); the
  // sharding of later layers overrides this.
  virtual std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const;
  // Accelerate's shuffle for a loader without a seed on several processes: one generator (the loader's
  // own, or else one seeded once from torch's default generator); at the start of every epoch
  // `synchronize` replaces its state with process 0's, then the epoch's permutation advances it.
  void synchronize_shuffle(std::function<void(at::Generator&)> synchronize);
  void abandon_epoch() override;
  void drop_loaded_resume() override;
  void check_generator_state(const std::vector<uint8_t>& bytes) const override;
  // The request to its batch sampler (0-based) in which the sampler's permutation runs out and it
  // takes its tail draw: the one after the last full batch, floor(n / batch_size) (the short last
  // batch, or the request that ends the epoch); a sharding sampler's requests take several.
  virtual int64_t sampler_tail_request() const;
  void check_worker_states(const std::vector<std::vector<uint8_t>>& states) const override;
  // With workers, the shuffle: PyTorch's worker iterator asks its sampler for indices when it is made.
  void draw_at_iterator_creation() override;

 private:
  void start_epoch();
  // The generators of the epoch's worker threads: seeded from its base seed, or as a loaded state left them.
  std::vector<at::Generator> epoch_workers(uint64_t base_seed);
  // The sampler generator's draw as its permutation runs out (none for other shuffles).
  void take_tail_draw() const;
  // Takes it in the epoch's call `call` (0-based; the calls of a resumed epoch's skipped batches
  // count) if PyTorch's iterator asks for it by then (tail_call) and it is not taken yet.
  void take_tail_draw_by(int64_t call);
  // The call of the epoch in which PyTorch's (or Accelerate's prepared) iterator asks its batch
  // sampler for request sampler_tail_request().
  int64_t tail_call() const;
  // Whether the order comes from generator_ (else from a seed, or there is no shuffle).
  bool shuffles_with_generator() const { return generator_ && options().shuffle && !options().seed; }
  // At an epoch's start, before its base seed is drawn: generator_ takes a loaded state, then
  // process 0's (synchronize_shuffle).
  void restore_generator();
  // The epoch's sample order when shuffling (order_), and the seed or generator state that gives it.
  void shuffle_epoch();

  std::shared_ptr<Dataset> dataset_;
  bool variable_batches_ = false;
  std::optional<uint64_t> epoch_seed_;
  std::optional<uint64_t> resume_seed_;  // from load_state: the next epoch's seed, not drawn again
  // The sampler's generator: the loader's own (options' generator) or synchronize_shuffle's.
  std::optional<at::Generator> generator_;
  std::function<void(at::Generator&)> synchronize_;
  at::Tensor epoch_start_generator_state_;       // its state before this epoch's permutation
  std::vector<uint8_t> resume_generator_state_;  // from load_state
  std::vector<std::vector<uint8_t>> resume_worker_states_;  // from load_state
  std::vector<uint8_t> resume_next_batch_random_state_;     // from load_state
  bool one_ahead_ = false;                                  // fetch_one_ahead
  bool tail_taken_ = false;                                 // take_tail_draw_by
  bool order_drawn_ = false;  // draw_at_iterator_creation's shuffle, for the epoch create_iterator began
  std::vector<int64_t> order_;                   // the epoch's shuffled sample order
  int64_t skipped_ = 0;                          // batches skip_first_batches dropped from this epoch
  std::vector<std::vector<int64_t>> plan_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace acc

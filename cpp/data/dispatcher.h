// Accelerate's DataLoaderDispatcher (dispatch_batches): process 0 alone reads the data (P batches
// per step, or one with split_batches), broadcasts each global batch, and every process keeps its
// slice. The data source is read once, not P times.
#pragma once

#include <exception>
#include <memory>
#include <optional>

#include "data/dataloader.h"
#include "data/sharding.h"
#include "ops/collectives.h"

namespace acc {

class DispatchingDataLoader final : public DataLoader {
 public:
  // base: the loader process 0 reads (other processes never touch it); its options give batch size,
  // drop_last and device.
  DispatchingDataLoader(std::shared_ptr<DataLoader> base, std::shared_ptr<Distributed> dist, bool split_batches);

  std::optional<std::vector<at::Tensor>> next() override;
  int64_t length() const override;
  // The real size of the last global batch, once it is known.
  int64_t remainder() const override { return remainder_; }
  int64_t position() const override { return position_; }
  int64_t total_batch_size() const override {
    return acc::total_batch_size(options().batch_size, collectives_.world_size(), split_);
  }
  int64_t total_dataset_length() const override { return base_->total_dataset_length(); }
  // The shuffle seed lives in process 0's base loader.
  LoaderState state() const override;
  void load_state(const LoaderState& state) override;
  void check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const override;

 protected:
  void abandon_epoch() override;
  void drop_loaded_resume() override;
  void check_generator_state(const std::vector<uint8_t>& bytes) const override;

 private:
  // A process other than 0 at an epoch's start: the draws of the base iterator it makes and never reads.
  void take_iterator_draws_of_an_unread_base();
  // Process 0: the next global batch and whether it is the last; others: received.
  std::optional<std::vector<at::Tensor>> fetch_global(bool& last);
  std::optional<std::vector<at::Tensor>> read_global();
  // Process 0 reads the next global batch ahead: under a resumed state, if it is the one a checkpoint
  // had read ahead; its global random state is recorded when the base reads on this thread.
  void read_ahead();
  // The header, then the batch, from process 0; where process 0's read failed (`failure`) or its
  // batch cannot be sent, every process throws (process 0 its own error).
  std::vector<at::Tensor> receive(const std::vector<at::Tensor>& mine, bool& stop, bool& last,
                                  std::exception_ptr failure);

  std::shared_ptr<DataLoader> base_;
  Collectives collectives_;
  bool split_;
  std::optional<std::vector<at::Tensor>> lookahead_;  // process 0 reads one global batch ahead
  std::vector<at::Tensor> first_;                      // the epoch's first global batch
  // Process 0, when the base draws on its thread (MapDataLoader::first_batch_random_state): the
  // global generator's state lookahead_ and first_ were read under, and from load_state, the one to
  // read the batch read ahead under again.
  at::Tensor lookahead_random_state_;
  std::vector<uint8_t> first_random_state_;
  at::Tensor resume_next_random_state_;
  int64_t resume_position_ = 0;
  // Over a map-style base, a skip that is not a resume leaves its batches unread, as Accelerate's
  // SkipBatchSampler does (so its dataset draws nothing for them, its workers start with the first
  // batch read, and the epoch's first batch, which pads the last, is the first one read).
  const bool base_skips_unread_;
  int64_t unread_skip_ = 0;                    // this epoch's
  std::optional<int64_t> resume_unread_skip_;  // from load_state, for the epoch it resumes
  int64_t remainder_ = -1;
  int64_t position_ = 0;
  int64_t epochs_begun_ = 0;      // by this loader, on every process alike: the headers name theirs
  bool dispatched_last_ = false;  // every process learnt it with the last batch's header
  bool base_done_ = false;        // process 0: the base loader's epoch has ended (do not restart it)
};

}  // namespace acc

// The loader over a stream (Accelerate's IterableDatasetShard on several processes).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "data/iterable.h"
#include "data/sharding.h"

namespace acc {

// A loader over a stream (an iterable dataset), sharded as Accelerate's IterableDatasetShard on
// several processes. The stream is read on the calling thread: prepared, one batch ahead (to flag
// the last), as Accelerate's DataLoaderShard iterates; otherwise only when a batch is asked for, as
// PyTorch's DataLoader reads it, or when end_of_epoch asks whether one follows.
class IterableDataLoader final : public DataLoader {
 public:
  IterableDataLoader(std::shared_ptr<IterableSource> source, DataLoaderOptions options, ShardOptions shard);

  std::optional<std::vector<at::Tensor>> next() override;
  // From the stream's size hint; -1 when the size is unknown.
  int64_t length() const override;
  // Real samples in the padded last round (known once the stream has ended); -1 otherwise.
  int64_t remainder() const override { return tail_real_ > 0 ? tail_real_ : -1; }
  int64_t position() const override { return position_; }
  int64_t total_batch_size() const override {
    return acc::total_batch_size(options().batch_size, shard_.num_processes, shard_.split_batches);
  }
  int64_t total_dataset_length() const override { return source_->size_hint(); }
  // A prepared stream's checkpoint also keeps torch's global generator states its epoch's first batch
  // and the batch read ahead were read under: a resumed epoch reads the batches it skips again, and
  // reads those two under them (the first pads a sharded epoch's last round), then puts the loaded
  // state back, so a stream that draws resumes exactly.
  LoaderState state() const override;
  void load_state(const LoaderState& state) override;
  void check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const override;
  std::vector<uint8_t> first_batch_random_state() const override;
  const std::shared_ptr<IterableSource>& source() const { return source_; }

 protected:
  void abandon_epoch() override;
  void drop_loaded_resume() override;
  void settle_end_of_epoch() override;

 private:
  std::optional<std::vector<at::Tensor>> produce();
  void start_epoch();
  // Reads the next batch into lookahead_ (nullopt at the epoch's end).
  void look_ahead();
  // Reads the batches a (resumed) epoch skips, then the one ahead, under the states state() saved.
  void read_epoch_start(int64_t skip);

  std::shared_ptr<IterableSource> source_;
  ShardOptions shard_;
  int64_t per_;
  std::unique_ptr<IterableSharder<Sample>> sharder_;
  std::vector<Sample> ready_;
  bool stream_done_ = false;
  bool looked_ahead_ = false;  // lookahead_ holds the next batch, or nullopt for the end
  std::optional<std::vector<at::Tensor>> lookahead_;
  at::Tensor first_read_state_;  // the global generator's state before the epoch's first batch
  at::Tensor ahead_read_state_;  // and before lookahead_
  std::vector<uint8_t> resume_first_state_, resume_ahead_state_;  // from load_state
  int64_t tail_real_ = -1;
  int64_t position_ = 0;
};

}  // namespace acc

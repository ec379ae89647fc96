// Iterable datasets: streams of samples read from the start at each epoch (PyTorch's
// IterableDataset), and Accelerate's IterableDatasetShard over them.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <vector>

#include "common/error.h"

namespace acc {

using Sample = std::vector<at::Tensor>;

class IterableSource {
 public:
  virtual ~IterableSource() = default;
  virtual void start_epoch(int64_t epoch) = 0;
  // The next sample, or nullopt at the end of the stream.
  virtual std::optional<Sample> next() = 0;
  // The number of samples, when known; -1 otherwise.
  virtual int64_t size_hint() const { return -1; }
};

// A stream from functions of the host program.
class CallbackIterable final : public IterableSource {
 public:
  using NextFn = std::function<std::optional<Sample>()>;
  using StartFn = std::function<void(int64_t epoch)>;
  CallbackIterable(NextFn next, StartFn start, int64_t size_hint)
      : next_(std::move(next)), start_(std::move(start)), size_hint_(size_hint) {
    require(static_cast<bool>(next_), "an iterable dataset needs a next function");
  }
  void start_epoch(int64_t epoch) override {
    if (start_) start_(epoch);
  }
  std::optional<Sample> next() override { return next_(); }
  int64_t size_hint() const override { return size_hint_; }

 private:
  NextFn next_;
  StartFn start_;
  int64_t size_hint_;
};

// IterableDatasetShard as a stream: every process reads every sample, in rounds of batch_size * P
// (batch_size with split_batches), and keeps its slice; a short last round is filled from the first
// full round, or dropped with drop_last.
template <typename T>
class IterableSharder {
 public:
  IterableSharder(int64_t batch_size, bool drop_last, int64_t num_processes, int64_t rank, bool split)
      : real_(split ? batch_size : batch_size * num_processes),
        per_(split ? batch_size / num_processes : batch_size),
        rank_(rank),
        drop_last_(drop_last) {
    require(!split || batch_size <= 1 || batch_size % num_processes == 0, "split_batches needs a batch size (",
            batch_size, ") that is a round multiple of the number of processes (", num_processes, ")");
  }

  // Feeds one sample; appends what this process yields to `out`.
  void push(T sample, std::vector<T>& out) {
    round_.push_back(std::move(sample));
    if (static_cast<int64_t>(round_.size()) < real_) return;
    take(round_, out);
    if (first_.empty()) first_ = round_;
    round_.clear();
  }
  // At the end of the stream; returns how many real samples the padded last round held (0: none).
  int64_t finish(std::vector<T>& out) {
    if (drop_last_ || round_.empty()) return 0;
    const auto real = static_cast<int64_t>(round_.size());
    if (first_.empty()) first_ = round_;
    while (static_cast<int64_t>(round_.size()) < real_) round_.insert(round_.end(), first_.begin(), first_.end());
    take(round_, out);
    round_.clear();
    return real;
  }

 private:
  void take(const std::vector<T>& round, std::vector<T>& out) const {
    for (int64_t i = rank_ * per_; i < (rank_ + 1) * per_; ++i) out.push_back(round[static_cast<size_t>(i)]);
  }

  int64_t real_, per_, rank_;
  bool drop_last_;
  std::vector<T> round_, first_;
};

}  // namespace acc

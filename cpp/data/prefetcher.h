// Fetches a fixed list of batches on worker threads, at most `depth` ahead of the consumer, and
// hands them out in order; or, without workers, on the consumer's thread, optionally one batch
// ahead. Errors raised while fetching are rethrown to the consumer.
#pragma once

#include <unistd.h>

#include <ATen/ATen.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace acc {

class Prefetcher {
 public:
  using Batch = std::vector<at::Tensor>;
  using Fetch = std::function<Batch(size_t index)>;

  // Without `workers`, batches are fetched in next(), on the consumer's thread. Otherwise one thread
  // per worker generator, assigned as PyTorch's DataLoader assigns batches to its worker processes,
  // round robin: batch i goes to worker i % workers, and draws from that worker's generator
  // (WorkerGeneratorScope), so that every batch sees the same random numbers on every run.
  Prefetcher(size_t count, Fetch fetch, std::vector<at::Generator> workers, size_t depth);
  // Without workers: what fetching on the consumer's thread does beyond fetching each batch when
  // it is asked for.
  struct OnConsumerThread {
    // Fetch batch i + 1 before handing out batch i, as Accelerate's prepared loaders iterate: what
    // the dataset draws from torch's global generator for a batch comes before the draws the
    // training step on the batch before it takes.
    bool one_ahead = false;
    // The global generator's state to fetch the first batch under: a resumed epoch's next batch,
    // fetched ahead before the checkpoint under that state (the state is put back after it), or the
    // batches of an epoch read again from its start (put_back false: they go on from it).
    at::Tensor first_fetch_random_state;
    bool put_back = true;
  };
  Prefetcher(size_t count, Fetch fetch, OnConsumerThread how);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The batch at the next index, waiting for it if needed; false when all were handed out.
  bool next(Batch& out);
  size_t consumed() const { return consumed_; }
  // Each worker generator's state as fetching the batches handed out so far left it (what batches
  // fetched ahead drew is not in it), starting with the worker of the next batch: the generators of
  // a Prefetcher that goes on from here (a resumed run's). Consumer's thread only.
  std::vector<at::Tensor> next_worker_states() const;
  // With a batch fetched ahead on the consumer's thread: the global generator's state it was fetched
  // under, which a resumed run fetches it under again (undefined when none is held).
  at::Tensor ahead_random_state() const { return ahead_ ? ahead_random_state_ : at::Tensor(); }
  // Without workers, once the first batch is fetched: the global generator's state it was fetched
  // under (OnConsumerThread's, or the one it found).
  at::Tensor first_random_state() const { return first_fetch_random_state_; }

 private:
  struct Fetched {
    Batch batch;
    std::exception_ptr error;
    at::Tensor generator_state;  // the worker's, after this fetch
  };
  void work(size_t worker);
  bool next_on_consumer_thread(Batch& out);
  // Fetches batch `index` on this thread, keeping an error for the consumer.
  Fetched fetch_here(size_t index);

  const size_t count_;
  const Fetch fetch_;
  const std::vector<at::Generator> workers_;
  const size_t depth_;
  std::vector<at::Tensor> worker_states_;  // see next_worker_states
  struct Sync {
    std::mutex mutex;
    std::condition_variable ready;  // a batch was stored
    std::condition_variable room;   // the consumer took one
  };
  // On the heap: a forked child leaves it be (its condition variables may count the parent's
  // waiting workers, and destroying them would wait for those forever).
  std::unique_ptr<Sync> sync_ = std::make_unique<Sync>();
  std::map<size_t, Fetched> fetched_;
  size_t consumed_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  const pid_t owner_ = ::getpid();  // the process its worker threads run in
  // Without workers (OnConsumerThread).
  const bool one_ahead_ = false;
  at::Tensor first_fetch_random_state_;
  const bool put_back_ = true;
  std::optional<Fetched> ahead_;
  at::Tensor ahead_random_state_;
};

}  // namespace acc

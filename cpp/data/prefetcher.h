// Fetches a fixed list of batches on background threads, at most `depth` ahead of the consumer,
// and hands them out in order. Errors raised while fetching are rethrown to the consumer.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace acc {

class Prefetcher {
 public:
  using Batch = std::vector<at::Tensor>;
  using Fetch = std::function<Batch(size_t index)>;

  // workers == 0 fetches synchronously in next().
  Prefetcher(size_t count, Fetch fetch, size_t workers, size_t depth);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The batch at the next index, waiting for it if needed; false when all were handed out.
  bool next(Batch& out);
  size_t consumed() const { return consumed_; }

 private:
  void work();

  const size_t count_;
  const Fetch fetch_;
  const size_t depth_;
  std::mutex mutex_;
  std::condition_variable ready_;    // a batch was stored
  std::condition_variable room_;     // the consumer took one
  std::map<size_t, Batch> done_;
  std::map<size_t, std::exception_ptr> failed_;
  size_t next_to_fetch_ = 0;
  size_t consumed_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace acc

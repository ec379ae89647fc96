#include "data/prefetcher.h"

#include <ATen/core/grad_mode.h>

#include "common/thread_name.h"

namespace acc {

Prefetcher::Prefetcher(size_t count, Fetch fetch, size_t workers, size_t depth)
    : count_(count), fetch_(std::move(fetch)), depth_(std::max<size_t>(depth, 1)) {
  for (size_t i = 0; i < workers && i < count; ++i)
    threads_.emplace_back([this] {
      name_this_thread("acc-loader");
      work();
    });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  room_.notify_all();
  for (auto& t : threads_) t.join();
}

void Prefetcher::work() {
  at::NoGradGuard no_grad;  // loading data records no autograd history
  for (;;) {
    size_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      room_.wait(lock, [&] { return stopping_ || next_to_fetch_ >= count_ || next_to_fetch_ < consumed_ + depth_; });
      if (stopping_ || next_to_fetch_ >= count_) return;
      index = next_to_fetch_++;
    }
    Batch batch;
    std::exception_ptr error;
    try {
      batch = fetch_(index);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error)
        failed_[index] = error;
      else
        done_[index] = std::move(batch);
    }
    ready_.notify_all();
  }
}

bool Prefetcher::next(Batch& out) {
  if (consumed_ >= count_) return false;
  if (threads_.empty()) {
    at::NoGradGuard no_grad;
    out = fetch_(consumed_++);
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return done_.count(consumed_) || failed_.count(consumed_); });
  auto failed = failed_.find(consumed_);
  if (failed != failed_.end()) {
    std::exception_ptr error = failed->second;
    failed_.erase(failed);
    ++consumed_;
    lock.unlock();
    room_.notify_all();
    std::rethrow_exception(error);
  }
  auto it = done_.find(consumed_);
  out = std::move(it->second);
  done_.erase(it);
  ++consumed_;
  lock.unlock();
  room_.notify_all();
  return true;
}

}  // namespace acc

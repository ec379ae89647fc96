#include "data/prefetcher.h"

#include <ATen/core/grad_mode.h>

#include <unistd.h>

#include "common/error.h"
#include "common/random.h"
#include "common/thread_name.h"

namespace acc {

Prefetcher::Prefetcher(size_t count, Fetch fetch, std::vector<at::Generator> workers, size_t depth)
    : count_(count), fetch_(std::move(fetch)), workers_(std::move(workers)), depth_(std::max<size_t>(depth, 1)) {
  for (const auto& generator : workers_) worker_states_.push_back(generator.get_state());
  for (size_t w = 0; w < workers_.size() && w < count; ++w)
    threads_.emplace_back([this, w] {
      name_this_thread("acc-loader");
      work(w);
    });
}

Prefetcher::Prefetcher(size_t count, Fetch fetch, OnConsumerThread how)
    : count_(count),
      fetch_(std::move(fetch)),
      depth_(1),
      one_ahead_(how.one_ahead),
      first_fetch_random_state_(std::move(how.first_fetch_random_state)),
      put_back_(how.put_back) {}

Prefetcher::~Prefetcher() {
  if (::getpid() != owner_) {  // a forked child: the workers (and maybe a held mutex) stayed in the parent
    // Their handles name no thread here (the child's own threads may have their numbers): neither
    // joined nor detached, kept for good.
    static_cast<void>(new std::vector<std::thread>(std::move(threads_)));
    static_cast<void>(sync_.release());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(sync_->mutex);
    stopping_ = true;
  }
  sync_->room.notify_all();
  for (auto& t : threads_) t.join();
}

void Prefetcher::work(size_t worker) {
  WorkerGeneratorScope generator(workers_[worker]);
  for (size_t index = worker; index < count_; index += workers_.size()) {
    {
      std::unique_lock<std::mutex> lock(sync_->mutex);
      sync_->room.wait(lock, [&] { return stopping_ || index < consumed_ + depth_; });
      if (stopping_) return;
    }
    Fetched fetched = fetch_here(index);
    fetched.generator_state = workers_[worker].get_state();
    {
      std::lock_guard<std::mutex> lock(sync_->mutex);
      fetched_[index] = std::move(fetched);
    }
    sync_->ready.notify_all();
  }
}

bool Prefetcher::next(Batch& out) {
  if (consumed_ >= count_) return false;
  if (threads_.empty()) return next_on_consumer_thread(out);
  if (::getpid() != owner_)
    fail(Status::InvalidArgument, "this data loader's worker threads are in the process that forked this one: ",
         "iterate it there, or make a loader in this process");
  std::unique_lock<std::mutex> lock(sync_->mutex);
  sync_->ready.wait(lock, [&] { return fetched_.count(consumed_) > 0; });
  auto it = fetched_.find(consumed_);
  Fetched fetched = std::move(it->second);
  fetched_.erase(it);
  worker_states_[consumed_ % workers_.size()] = std::move(fetched.generator_state);
  ++consumed_;
  lock.unlock();
  sync_->room.notify_all();
  if (fetched.error) std::rethrow_exception(fetched.error);
  out = std::move(fetched.batch);
  return true;
}

Prefetcher::Fetched Prefetcher::fetch_here(size_t index) {
  at::NoGradGuard no_grad;  // loading data records no autograd history
  Fetched fetched;
  try {
    fetched.batch = fetch_(index);
  } catch (...) {
    fetched.error = std::current_exception();
  }
  return fetched;
}

bool Prefetcher::next_on_consumer_thread(Batch& out) {
  Fetched current;
  if (ahead_) {
    current = std::move(*ahead_);
    ahead_.reset();
  } else if (consumed_ == 0 && first_fetch_random_state_.defined()) {
    const at::Tensor now = global_random_state();
    set_global_random_state(first_fetch_random_state_);
    current = fetch_here(consumed_);
    if (put_back_) set_global_random_state(now);
  } else {
    if (consumed_ == 0) first_fetch_random_state_ = global_random_state();
    current = fetch_here(consumed_);
  }
  ++consumed_;
  // A failed fetch ahead is reported with the batch it was for, as a fetch without look-ahead is.
  if (one_ahead_ && consumed_ < count_ && !current.error) {
    ahead_random_state_ = global_random_state();
    ahead_ = fetch_here(consumed_);
  }
  if (current.error) std::rethrow_exception(current.error);
  out = std::move(current.batch);
  return true;
}

std::vector<at::Tensor> Prefetcher::next_worker_states() const {
  std::vector<at::Tensor> states;
  for (size_t i = 0; i < worker_states_.size(); ++i)
    states.push_back(worker_states_[(consumed_ + i) % worker_states_.size()]);
  return states;
}

}  // namespace acc

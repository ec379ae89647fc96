#include "parallel/frozen_release.h"

#include <algorithm>

namespace acc {
namespace {

void add_unique(std::vector<size_t>& into, const std::vector<size_t>& from) {
  for (size_t x : from)
    if (std::find(into.begin(), into.end(), x) == into.end()) into.push_back(x);
}

}  // namespace

FrozenReleaseTracker::FrozenReleaseTracker(std::vector<std::vector<size_t>> frozen_of,
                                           std::vector<std::vector<size_t>> trainable_of, size_t frozen_units,
                                           std::function<void(size_t)> release)
    : frozen_of_(std::move(frozen_of)),
      trainable_of_(std::move(trainable_of)),
      release_(std::move(release)),
      running_(frozen_of_.size(), false),
      open_(frozen_of_.size()),
      outstanding_(frozen_units, 0),
      held_(frozen_units, false) {
  size_t trainable_units = 0;
  for (const auto& units : trainable_of_)
    for (size_t u : units) trainable_units = std::max(trainable_units, u + 1);
  awaiting_trainable_.resize(trainable_units);
}

void FrozenReleaseTracker::call_begins(size_t m) {
  if (m < running_.size()) running_[m] = true;
}

void FrozenReleaseTracker::call_inputs(const std::vector<size_t>& units, const std::vector<at::Tensor>& inputs) {
  auto call = std::make_shared<Call>();
  for (size_t m : units) {
    if (m >= open_.size()) continue;
    open_[m] = call;
    add_unique(call->frozen, frozen_of_[m]);
    add_unique(call->trainable, trainable_of_[m]);
  }
  std::weak_ptr<FrozenReleaseTracker> tracker = weak_from_this();
  for (const auto& input : inputs) {
    if (!input.defined() || !input.requires_grad()) continue;
    ++call->waiting;
    // The hook runs once the input's gradient is complete: every node of this call that feeds it has run.
    input.register_hook([tracker, call](const at::Tensor&) {
      if (auto self = tracker.lock()) self->signal(call);
    });
  }
}

void FrozenReleaseTracker::call_output(size_t m, bool requires_grad) {
  if (m >= open_.size()) return;
  running_[m] = false;
  std::shared_ptr<Call> call = std::move(open_[m]);
  open_[m].reset();
  if (!requires_grad) return;
  if (!call) {  // inputs not reported: nothing tells when its backward is done
    for (size_t f : frozen_of_[m]) held_[f] = true;
    return;
  }
  if (call->armed) return;  // another of the call's units armed it
  call->armed = true;
  for (size_t f : call->frozen) ++outstanding_[f];
  for (size_t t : call->trainable) awaiting_trainable_[t].push_back(call);
  call->waiting += static_cast<int64_t>(call->trainable.size());
  // No signal will come (nothing it depends on needs gradients, yet its output does): held.
  if (call->waiting == 0)
    for (size_t f : call->frozen) held_[f] = true;
  armed_.push_back(std::move(call));
}

void FrozenReleaseTracker::forward_ended(bool backward_follows) {
  for (size_t m = 0; m < running_.size(); ++m) {
    if (running_[m] && backward_follows)
      for (size_t f : frozen_of_[m]) held_[f] = true;
    running_[m] = false;
    if (open_[m]) open_[m]->forgotten = true;
    open_[m].reset();
  }
}

void FrozenReleaseTracker::trainable_ready(size_t unit) {
  if (unit >= awaiting_trainable_.size()) return;
  std::vector<std::shared_ptr<Call>> calls = std::move(awaiting_trainable_[unit]);
  awaiting_trainable_[unit].clear();
  for (const auto& call : calls) signal(call);
}

void FrozenReleaseTracker::signal(const std::shared_ptr<Call>& call) {
  if (call->forgotten || !call->armed || call->waiting <= 0 || --call->waiting > 0) return;
  for (size_t f : call->frozen)
    if (--outstanding_[f] == 0 && !held_[f] && exact_) release_(f);
}

void FrozenReleaseTracker::forget_calls() {
  for (auto& call : armed_) call->forgotten = true;
  for (auto& call : open_)
    if (call) call->forgotten = true;
  armed_.clear();
  for (auto& calls : awaiting_trainable_) calls.clear();
  std::fill(open_.begin(), open_.end(), nullptr);
  std::fill(running_.begin(), running_.end(), false);
  std::fill(outstanding_.begin(), outstanding_.end(), 0);
  std::fill(held_.begin(), held_.end(), false);
}

void FrozenReleaseTracker::forward_begins() {
  if (armed_.empty()) return;
  forget_calls();
  exact_ = false;
}

void FrozenReleaseTracker::backward_ended() {
  forget_calls();
  exact_ = true;
}

}  // namespace acc

#include "accelerator/gradient_state.h"

#include <algorithm>

namespace acc {

void GradientState::begin_micro_step() {
  if (sync_with_dataloader_ && end_of_dataloader()) {
    step_ = 0;
    sync_gradients_ = true;
  } else {
    sync_gradients_ = ++step_ % num_steps_ == 0;
  }
}

bool GradientState::end_of_dataloader() const {
  std::lock_guard<std::mutex> lock(active_mutex_);
  return !active_.empty() && active_.back().end_of_dataloader;
}

int64_t GradientState::remainder() const {
  std::lock_guard<std::mutex> lock(active_mutex_);
  return active_.empty() ? -1 : active_.back().remainder;
}

void GradientState::on_batch(const DataLoader& loader, bool last_of_epoch) {
  const int64_t remainder = last_of_epoch ? loader.remainder() : -1;  // only read at the end of the loader
  std::lock_guard<std::mutex> lock(active_mutex_);
  auto it = std::find_if(active_.begin(), active_.end(), [&](const ActiveLoader& a) { return a.loader == &loader; });
  if (it == active_.end()) it = active_.insert(active_.end(), ActiveLoader{&loader});  // its epoch began
  it->end_of_dataloader = last_of_epoch;
  if (last_of_epoch) it->remainder = remainder;
}

void GradientState::on_epoch_end(const DataLoader& loader) {
  std::lock_guard<std::mutex> lock(active_mutex_);
  active_.erase(
      std::remove_if(active_.begin(), active_.end(), [&](const ActiveLoader& a) { return a.loader == &loader; }),
      active_.end());
}

}  // namespace acc

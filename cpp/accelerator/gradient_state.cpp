#include "accelerator/gradient_state.h"

#include <algorithm>

namespace acc {

void GradientState::begin_micro_step() {
  if (sync_with_dataloader_ && end_of_dataloader()) {
    step_ = 0;
    sync_gradients_ = true;
  } else {
    ++step_;
    sync_gradients_ = step_ % num_steps_ == 0;
  }
}

void GradientState::on_batch(const DataLoader& loader, bool last_of_epoch) {
  auto it = std::find_if(active_.begin(), active_.end(), [&](const ActiveLoader& a) { return a.loader == &loader; });
  if (it == active_.end()) it = active_.insert(active_.end(), ActiveLoader{&loader});  // its epoch began
  it->end_of_dataloader = last_of_epoch;
  if (last_of_epoch) it->remainder = loader.remainder();  // only read at the end of the loader
}

void GradientState::on_epoch_end(const DataLoader& loader) {
  active_.erase(
      std::remove_if(active_.begin(), active_.end(), [&](const ActiveLoader& a) { return a.loader == &loader; }),
      active_.end());
}

}  // namespace acc

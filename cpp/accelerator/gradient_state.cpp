#include "accelerator/gradient_state.h"

namespace acc {

void GradientState::begin_micro_step() {
  if (sync_with_dataloader_ && end_of_dataloader_) {
    step_ = 0;
    sync_gradients_ = true;
  } else {
    ++step_;
    sync_gradients_ = step_ % num_steps_ == 0;
  }
}

void GradientState::on_batch(const DataLoader& loader, bool last_of_epoch) {
  end_of_dataloader_ = last_of_epoch;
  if (last_of_epoch) remainder_ = loader.remainder();  // only read at the end of the loader
}

void GradientState::on_epoch_end(const DataLoader&) { end_of_dataloader_ = false; }

}  // namespace acc

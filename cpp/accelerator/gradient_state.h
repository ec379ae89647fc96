// When gradients are synchronised and optimizers step: Accelerate's GradientState.
#pragma once

#include <cstdint>

#include "data/dataloader.h"

namespace acc {

class GradientState final : public LoaderObserver {
 public:
  // sync_with_dataloader: the last batch of the loader being iterated also ends a window.
  explicit GradientState(int64_t num_steps, bool sync_with_dataloader = true)
      : num_steps_(num_steps), sync_with_dataloader_(sync_with_dataloader) {}

  bool sync_gradients() const { return sync_gradients_; }
  // Micro-steps counted by accumulate() in the current window (Accelerate's accelerator.step).
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }  // load_state
  bool end_of_dataloader() const { return end_of_dataloader_; }
  // Real samples in the last round of the loader being iterated (-1: unknown, 0: no padding).
  int64_t remainder() const { return remainder_; }

  // Entry of accumulate(): a window ends every num_steps micro-steps and at the last batch of the
  // prepared loader being iterated (the window restarts there).
  void begin_micro_step();

  void on_batch(const DataLoader& loader, bool last_of_epoch) override;
  void on_epoch_end(const DataLoader& loader) override;

 private:
  const int64_t num_steps_;
  const bool sync_with_dataloader_;
  bool sync_gradients_ = true;
  int64_t step_ = 0;
  bool end_of_dataloader_ = false;
  int64_t remainder_ = -1;
};

}  // namespace acc

// When gradients are synchronised and optimizers step: Accelerate's GradientState.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "data/dataloader.h"

namespace acc {

class GradientState final : public LoaderObserver {
 public:
  // sync_with_dataloader: the last batch of the loader being iterated also ends a window.
  explicit GradientState(int64_t num_steps, bool sync_with_dataloader = true)
      : num_steps_(num_steps), sync_with_dataloader_(sync_with_dataloader) {}

  bool sync_gradients() const { return sync_gradients_; }
  // Micro-steps counted by accumulate() since the end of the last loader (Accelerate's accelerator.step).
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }  // load_state
  // Of the loader iterated innermost (see active_): whether its last batch is out, and the real
  // samples in its last round (-1: unknown, or no loader is being iterated; 0: no padding).
  bool end_of_dataloader() const;
  int64_t remainder() const;

  // Entry of accumulate(): a window ends every num_steps micro-steps and at the last batch of the
  // prepared loader being iterated (the window restarts there).
  void begin_micro_step();

  void on_batch(const DataLoader& loader, bool last_of_epoch) override;
  void on_epoch_end(const DataLoader& loader) override;

 private:
  struct ActiveLoader {
    const DataLoader* loader;  // identity only
    bool end_of_dataloader = false;
    int64_t remainder = -1;
  };

  const int64_t num_steps_;
  const bool sync_with_dataloader_;
  // One state for every thread of the accelerator (as Accelerate's): atomics, so that threads
  // training at once read defined values.
  std::atomic<bool> sync_gradients_{true};
  std::atomic<int64_t> step_{0};
  // Accelerate's dataloader_references: the loaders whose epoch is under way, in the order they
  // began; the last one decides, so an evaluation loop inside a training loop leaves the training
  // loader's end of data and remainder as they were once it is done.
  std::vector<ActiveLoader> active_;
  // A loader freed on another thread (a binding's finalizer) leaves the stack from there.
  mutable std::mutex active_mutex_;
};

}  // namespace acc

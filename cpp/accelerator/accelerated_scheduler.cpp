#include "accelerator/accelerated_scheduler.h"

namespace acc {

AcceleratedScheduler::AcceleratedScheduler(std::shared_ptr<Scheduler> inner,
                                           std::shared_ptr<AcceleratedOptimizer> optimizer,
                                           std::shared_ptr<GradientState> state, int64_t num_processes,
                                           bool split_batches, bool step_with_optimizer)
    : inner_(std::move(inner)),
      optimizer_(std::move(optimizer)),
      state_(std::move(state)),
      repeats_(split_batches ? 1 : num_processes),
      step_with_optimizer_(step_with_optimizer) {}

void AcceleratedScheduler::step() {
  if (!step_with_optimizer_) return inner_->step();
  if (!state_->sync_gradients()) return;
  if (optimizer_ && optimizer_->step_was_skipped()) return;
  for (int64_t i = 0; i < repeats_; ++i) inner_->step();
}

}  // namespace acc

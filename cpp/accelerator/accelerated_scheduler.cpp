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

template <class InnerStep>
void AcceleratedScheduler::gated(InnerStep inner_step) {
  if (!step_with_optimizer_) return inner_step();
  if (!state_->sync_gradients()) return;
  if (optimizer_ && optimizer_->step_was_skipped()) return;
  for (int64_t i = 0; i < repeats_; ++i) {
    // Accelerate's special case for OneCycleLR: no step once it reached its total_steps.
    const std::optional<int64_t> total = inner_->total_steps();
    if (total && inner_->step_count() >= *total) return;
    inner_step();
  }
}

// A step of the wrong kind is refused even where the gate would skip it.
void AcceleratedScheduler::step() {
  if (inner_->takes_metric()) return inner_->step();  // its error
  gated([&] { inner_->step(); });
}

// As Accelerate passes step()'s arguments on: a plateau scheduler sees the metric once per
// inner step, so num_processes times per call unless batches are split.
void AcceleratedScheduler::step_with_metric(double metric) {
  if (!inner_->takes_metric()) return inner_->step_with_metric(metric);  // its error
  gated([&] { inner_->step_with_metric(metric); });
}

// Accelerate prepares a SequentialLR made whole beforehand.
void AcceleratedScheduler::then(int64_t, const std::string&, const Options&) {
  fail(Status::InvalidArgument, "a sequence of schedules is made before acc_prepare (it was prepared as '",
       inner_->name(), "')");
}

// And a ChainedScheduler too.
void AcceleratedScheduler::chain(const std::string&, const Options&) {
  fail(Status::InvalidArgument, "a chain of schedules is made before acc_prepare (it was prepared as '",
       inner_->name(), "')");
}

}  // namespace acc

// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's algorithm, Accelerate's defaults): the
// loss is multiplied by a scale before backward; gradients are divided by it once per step; a step
// whose gradients hold inf/nan is skipped and the scale backs off; after growth_interval good steps
// it grows. ATen's fused AMP kernels run where the device has them (CUDA), plain ops elsewhere.
//
// With hysteresis or a minimum scale it is DeepSpeed's DynamicLossScaler (what Accelerate trains
// fp16 with under DeepSpeed): an overflow skips the step but backs the scale off only once
// `hysteresis` overflows have used up the allowance, which a growth (with consecutive_hysteresis, any
// good step) restores; the scale never goes below min_scale, and an overflow at it ends the run.
//
// As in torch, overflow is tracked per optimizer (its OverflowFlag, held by the optimizer's
// wrapper): one optimizer's inf skips its own step only. Unlike Accelerate, which updates the scale after every optimizer's step, the scale changes
// once per step of the job, before the next loss is scaled: with several optimizers stepping on
// one backward, each divides its gradients by the scale they were multiplied with.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

namespace acc {

// Where one optimizer's overflow in the current step is recorded (torch's per-optimizer found_inf):
// its step reads it, and the scaler reads every flag of the step when it updates the scale. A flag
// from an earlier step reads as clear.
class OverflowFlag {
 private:
  friend class GradScaler;
  at::Tensor found_;    // float32 [1]
  int64_t step_ = -1;   // the scaler's step it belongs to
};

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // DeepSpeed's DynamicLossScaler (fp16.hysteresis, consecutive_hysteresis, min_loss_scale); the
  // defaults are torch's GradScaler, which has neither.
  int64_t hysteresis = 1;
  bool consecutive_hysteresis = false;
  double min_scale = 0;  // 0: none
  // GradScalerKwargs.enabled: false trains fp16 without loss scaling (no scaler is built).
  bool enabled = true;
};

class GradScaler {
 public:
  GradScaler(GradScalerOptions options, const c10::Device& device);

  // The loss times the scale; first applies the update a finished step left pending (settle()).
  at::Tensor scale(const at::Tensor& loss);
  // Divides the gradients by the scale and records in `flag` (of the optimizer they belong to)
  // whether any is not finite. Each gradient is divided once per step: a second call is a no-op.
  void unscale(const std::vector<at::Tensor>& grads, OverflowFlag& flag);
  // The same for gradients no optimizer steps with: their overflow changes the scale only.
  void unscale(const std::vector<at::Tensor>& grads) { unscale(grads, unowned_); }
  // Whether gradients unscaled under `flag` in this step held inf/nan; without a flag, any.
  bool found_inf(const OverflowFlag& flag) const;
  bool found_inf() const;
  // Records in `flag` what the processes agreed on (a sharded optimizer's slices differ).
  void set_found_inf(OverflowFlag& flag, bool found);
  // An optimizer stepped (or skipped its step): the scale updates before the next scale() call.
  void note_optimizer_step() { stepped_ = true; }
  // Fails (as DeepSpeed does) when `overflowed` would have to back the scale off below min_scale:
  // the overflow happened at the minimum with no hysteresis left. Call before skipping the step.
  void check_can_back_off(bool overflowed) const;
  // Applies a pending update now (before reading the state for a checkpoint).
  void settle();
  // Ends the step now: adjusts the scale from every flag's overflow and forgets the step's state.
  void update();
  // The scale and the count of good steps in a row (torch's scale / _growth_tracker) now, before a
  // pending update.
  double current_scale() const;
  int64_t growth_tracker() const;
  // Overflows still tolerated before the scale backs off (DeepSpeed's cur_hysteresis; 1 without).
  int64_t hysteresis_left() const { return hysteresis_left_; }
  // torch's GradScaler.state_dict() keeps its growth and backoff rules and load_state_dict puts them
  // back: `rules`, where a checkpoint holds them, replace the options' (none: the options' stay).
  struct ScaleRules {
    double growth_factor;
    double backoff_factor;
    int64_t growth_interval;
  };
  ScaleRules rules() const { return {options_.growth_factor, options_.backoff_factor, options_.growth_interval}; }
  // growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1: what a scaler is made with.
  static bool valid(const ScaleRules& rules);
  void load_state(double scale, int64_t growth_tracker, int64_t hysteresis_left,
                  const std::optional<ScaleRules>& rules = std::nullopt);
  // The checks of load_state alone (a finite scale > 0, a tracker in [0, growth_interval), a
  // hysteresis in [1, hysteresis], rules as the constructor takes them).
  void check_state(double scale, int64_t growth_tracker, int64_t hysteresis_left,
                   const std::optional<ScaleRules>& rules = std::nullopt) const;
  const GradScalerOptions& options() const { return options_; }

 private:
  void forget_step();
  // DeepSpeed's rules (and torch's, where hysteresis is 1 and there is no minimum) on the host.
  void update_on_host(bool overflowed);
  // scale *= factor, as torch rounds it; a product past float's range leaves the scale as it is.
  void rescale(double factor);
  // `flag`'s tensor for this step: cleared and listed the first time in a step.
  at::Tensor& current(OverflowFlag& flag);

  GradScalerOptions options_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]: good steps in a row
  bool fused_;
  int64_t hysteresis_left_;
  int64_t step_ = 0;                                     // counts the steps the scaler has ended
  std::vector<at::Tensor> step_flags_;                    // the flags used in this step
  OverflowFlag unowned_;                                  // gradients of no optimizer
  std::unordered_set<const c10::TensorImpl*> unscaled_;   // gradients divided in this step
  bool stepped_ = false;
};

}  // namespace acc

// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's algorithm, Accelerate's defaults): the
// loss is multiplied by a scale before backward; gradients are divided by it once per step; a step
// whose gradients hold inf/nan is skipped and the scale backs off; after growth_interval good steps
// it grows. ATen's fused AMP kernels run where the device has them (CUDA), plain ops elsewhere.
//
// As in torch, overflow is tracked per optimizer (a key): one optimizer's inf skips its own step
// only. Unlike Accelerate, which updates the scale after every optimizer's step, the scale changes
// once per step of the job, before the next loss is scaled: with several optimizers stepping on
// one backward, each divides its gradients by the scale they were multiplied with.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <unordered_set>
#include <vector>

namespace acc {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  GradScaler(GradScalerOptions options, const c10::Device& device);

  // The loss times the scale; first applies the update a finished step left pending (settle()).
  at::Tensor scale(const at::Tensor& loss);
  // Divides the gradients by the scale and records, under `key` (the optimizer they belong to),
  // whether any is not finite. Each gradient is divided once per step: a second call is a no-op.
  void unscale(const std::vector<at::Tensor>& grads, const void* key = nullptr);
  // Whether gradients unscaled under `key` in this step held inf/nan; without a key, any.
  bool found_inf(const void* key) const;
  bool found_inf() const;
  // Records under `key` what the processes agreed on (a sharded optimizer's slices differ).
  void set_found_inf(const void* key, bool found);
  // An optimizer stepped (or skipped its step): the scale updates before the next scale() call.
  void note_optimizer_step() { stepped_ = true; }
  // Applies a pending update now (before reading the state for a checkpoint).
  void settle();
  // Ends the step now: adjusts the scale from every key's overflow and forgets the step's state.
  void update();
  // The scale and the count of good steps in a row (torch's scale / _growth_tracker) now, before a
  // pending update.
  double current_scale() const;
  int64_t growth_tracker() const;
  void load_state(double scale, int64_t growth_tracker);
  // The checks of load_state alone (a finite scale > 0, a tracker in [0, growth_interval)).
  void check_state(double scale, int64_t growth_tracker) const;

 private:
  void forget_step();

  GradScalerOptions options_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]: good steps in a row
  bool fused_;
  std::map<const void*, at::Tensor> found_inf_;           // per key, float32 [1], this step
  std::unordered_set<const c10::TensorImpl*> unscaled_;   // gradients divided in this step
  bool stepped_ = false;
};

}  // namespace acc

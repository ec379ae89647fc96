// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's algorithm, Accelerate's defaults): the
// loss is multiplied by a scale before backward; gradients are divided by it once per step; a step
// whose gradients hold inf/nan is skipped and the scale backs off; after growth_interval good steps
// it grows. ATen's fused AMP kernels run where the device has them (CUDA), plain ops elsewhere.
#pragma once

#include <ATen/ATen.h>

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

  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale (once per step: a second call before update() does nothing)
  // and records whether any is not finite.
  void unscale(const std::vector<at::Tensor>& grads);
  bool unscaled() const { return unscaled_; }
  bool found_inf() const;
  // After the optimizer step (or its skip): adjusts the scale and starts the next step.
  void update();
  double current_scale() const;
  // Checkpoints: the scale and the count of good steps in a row (torch's scale / _growth_tracker).
  int64_t growth_tracker() const;
  void load_state(double scale, int64_t growth_tracker);
  // The checks of load_state alone (a finite scale > 0, a tracker in [0, growth_interval)).
  void check_state(double scale, int64_t growth_tracker) const;

 private:
  GradScalerOptions options_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]: good steps in a row
  at::Tensor found_inf_;       // float32 [1]
  bool unscaled_ = false;
  bool fused_;
};

}  // namespace acc

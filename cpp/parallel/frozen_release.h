// When stage 3 may free a frozen unit during backward. A trainable unit is freed once its gradients
// are all accumulated: every autograd node that saved its parameters has run by then, since each
// of those nodes feeds its gradient. A frozen parameter gets no gradient, so nothing marks the end
// of the nodes that saved it; they compute the gradients of what the call's computation depends on:
// the call's inputs and the trainable parameters of the units it runs. So one call of a module is
// done with its frozen units once the gradients of its inputs and its units' trainable parameters
// are complete (DeepSpeed and FSDP hook a module's inputs for the same reason), and a frozen unit is
// freed when every call of it that awaits a backward is done. A call whose inputs the model cannot
// report keeps its frozen units until the backward ends, as does every call while a forward began
// before the previous one's backward.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace acc {

class FrozenReleaseTracker : public std::enable_shared_from_this<FrozenReleaseTracker> {
 public:
  // `frozen_of[m]` / `trainable_of[m]`: the frozen / trainable flat units of the model's unit m;
  // `release` frees a frozen flat unit.
  FrozenReleaseTracker(std::vector<std::vector<size_t>> frozen_of, std::vector<std::vector<size_t>> trainable_of,
                       size_t frozen_units, std::function<void(size_t)> release);

  // A call running unit m begins (its units gathered).
  void call_begins(size_t m);
  // The call of the model's units `units` is about to run on `inputs` (every tensor it takes).
  void call_inputs(const std::vector<size_t>& units, const std::vector<at::Tensor>& inputs);
  // Unit m's call has run: a backward through it follows only when its output needs gradients.
  void call_output(size_t m, bool requires_grad);
  // The model's forward has run: a call it never saw end (its result not one tensor) keeps its
  // frozen units until the backward ends, if one follows.
  void forward_ended(bool backward_follows);
  // Every gradient of the trainable flat unit `unit` has been accumulated in this backward.
  void trainable_ready(size_t unit);
  // A forward that records gradients begins: calls still awaiting an earlier forward's backward
  // can no longer be told apart from this one's, so nothing is freed early until a backward ends.
  void forward_begins();
  // The backward ended, having freed every unit: every call is forgotten.
  void backward_ended();

 private:
  struct Call {
    std::vector<size_t> frozen, trainable;
    int64_t waiting = 0;  // input gradients and trainable units still to come
    bool armed = false;   // its output needs gradients: a backward through it counts
    bool forgotten = false;
  };
  void signal(const std::shared_ptr<Call>& call);
  void forget_calls();

  std::vector<std::vector<size_t>> frozen_of_, trainable_of_;
  std::function<void(size_t)> release_;
  std::vector<bool> running_;                   // by model unit: a call of it has begun, not ended
  std::vector<std::shared_ptr<Call>> open_;     // by model unit: the call running it, inputs seen
  std::vector<std::shared_ptr<Call>> armed_;    // awaiting their backward
  std::vector<std::vector<std::shared_ptr<Call>>> awaiting_trainable_;  // by trainable flat unit
  std::vector<int64_t> outstanding_;            // by frozen flat unit: armed calls not done
  std::vector<bool> held_;                      // by frozen flat unit: kept until the backward ends
  bool exact_ = true;
};

}  // namespace acc

// What the optimizer rules written here op for op after torch.optim's Python ones share: the
// closure and no-grad frame of a step, the dense gradient they read, and where Python's rules of
// 1.x and 2.x round differently, the rounding of the PyTorch version built against
// (compat::kPythonOptimizers2).
#pragma once

#include <torch/optim/optimizer.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "common/compat.h"
#include "common/error.h"

namespace acc {

// Runs a closure with gradients on and the step itself without, as torch::optim's rules do.
template <class Step>
at::Tensor with_closure(const torch::optim::Optimizer::LossClosure& closure, Step&& step) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  step();
  return loss;
}

// The gradient a rule reads: dense, as PyTorch's rules require.
inline const at::Tensor& dense_grad(const at::Tensor& p, const char* rule) {
  const at::Tensor& grad = p.grad();
  require(!grad.is_sparse(), rule, " does not support sparse gradients");
  return grad;
}

// Calls fn(p, grad, options) for every parameter with a gradient, group by group, with the group's
// options as `Options`.
template <class Options, class Fn>
void for_each_with_grad(torch::optim::Optimizer& optimizer, const char* rule, Fn&& fn) {
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const Options&>(group.options());
    for (auto& p : group.params())
      if (p.grad().defined()) fn(p, dense_grad(p, rule), options);
  }
}

// The state of `p`, made by `make` (returning a unique_ptr<State>) before its first step.
template <class State, class Make>
State& state_of(torch::optim::Optimizer& optimizer, const at::Tensor& p, Make&& make) {
  auto& slot = optimizer.state()[compat::optimizer_state_key(p)];
  if (!slot) slot = make();
  return static_cast<State&>(*slot);
}

// PyTorch's foreach argument, for the rules whose foreach form (Python's _multi_tensor_* rule, which
// steps lists of tensors with _foreach ops) rounds otherwise than their one-tensor form: unset takes
// PyTorch's default, the foreach form for CUDA parameters from 2.0 and the one-tensor form elsewhere.
class ForeachChoice {
 public:
  virtual ~ForeachChoice() = default;
  void set_foreach(std::optional<bool> foreach) { foreach_ = foreach; }
  bool steps_by_foreach(const at::Tensor& p) const {
    return foreach_ ? *foreach_ : compat::kPythonOptimizers2 && p.is_cuda();
  }

 private:
  std::optional<bool> foreach_;
};

// What the parameters of each device and dtype gather (a list of slots, or the lists one kernel
// call takes), kept apart as Python's foreach and fused rules group their tensors
// (_group_tensors_by_device_and_dtype).
template <class Group>
class DeviceDtypeGroups {
 public:
  Group& of(const at::Tensor& p) { return groups_[{p.device().type(), p.device().index(), p.scalar_type()}]; }
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (const auto& entry : groups_) fn(entry.second);
  }

 private:
  std::map<std::tuple<c10::DeviceType, c10::DeviceIndex, at::ScalarType>, Group> groups_;
};

template <class Slot>
using ForeachGroups = DeviceDtypeGroups<std::vector<Slot>>;

// A step count as the float32 0-dim tensor on the parameter's device that PyTorch's fused and
// foreach rules keep (and compute with), made once per device and count.
class StepTensors {
 public:
  const at::Tensor& get(const at::Tensor& p, int64_t step) {
    auto& t = made_[{p.device().type(), p.device().index(), step}];
    if (!t.defined()) t = at::full({}, static_cast<double>(step), at::TensorOptions(p.device()).dtype(at::kFloat));
    return t;
  }

 private:
  std::map<std::tuple<c10::DeviceType, c10::DeviceIndex, int64_t>, at::Tensor> made_;
};

// avg <- keep * avg + (1 - keep) * value: 2.x lerp_s, 1.x multiplied and added.
inline void update_average(const at::Tensor& avg, const at::Tensor& value, double keep) {
  if constexpr (compat::kPythonOptimizers2)
    avg.lerp_(value, 1 - keep);
  else
    avg.mul_(keep).add_(value, 1 - keep);
}

// 2.x's x ** 0.5 or 1.x's math.sqrt(x): libm's pow and sqrt may round apart.
inline double python_sqrt(double x) { return compat::kPythonOptimizers2 ? std::pow(x, 0.5) : std::sqrt(x); }

}  // namespace acc

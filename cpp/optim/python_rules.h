// Adam, AdamW, RMSprop and Adagrad stepped as torch.optim's Python rules of the PyTorch version built
// against, op for op. torch::optim's C++ rules are not kept in step with Python's: from 2.0 Python
// updates Adam's first moment and RMSprop's centred average with lerp_ (C++ kept mul_ and add_, which
// rounds otherwise), and with foreach (its default for CUDA parameters, see ForeachChoice) Python
// steps with its foreach ops, which round otherwise than its one-tensor rule on CUDA for Adam (the
// bias correction's division) and Adagrad (the step is scaled before the division, not after).
// RMSprop's foreach rule rounds as its one-tensor rule. Options and state stay
// torch::optim's, so everything that reads them (checkpoints, sharding, offload) is unchanged.
#pragma once

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>

#include <ATen/ATen.h>

#include <memory>

#include "optim/rule_helpers.h"

namespace acc {

// torch::optim's optimizer `Base` with Python's step; each rule specialises step() (python_rules.cpp).
template <class Base>
class PythonRule final : public Base, public ForeachChoice {
 public:
  using Base::Base;
  at::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
};

// Adam's and AdamW's state before a parameter's first step, as torch.optim makes it (the running
// maximum only with amsgrad); the fused rules make theirs so too.
template <class State>
std::unique_ptr<State> new_adam_state(const at::Tensor& p, bool amsgrad) {
  auto fresh = std::make_unique<State>();
  fresh->step(0);
  fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
  fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
  if (amsgrad) fresh->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
  return fresh;
}

// Adagrad's state of `p`, made with the optimizer (algorithm_adagrad.cpp); the fused rule reads it too.
inline torch::optim::AdagradParamState& adagrad_state(torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  auto it = optimizer.state().find(compat::optimizer_state_key(p));
  require(it != optimizer.state().end() && it->second, "Adagrad: a parameter has no accumulator");
  return static_cast<torch::optim::AdagradParamState&>(*it->second);
}

using PythonAdam = PythonRule<torch::optim::Adam>;
using PythonAdamW = PythonRule<torch::optim::AdamW>;
using PythonRmsProp = PythonRule<torch::optim::RMSprop>;
using PythonAdagrad = PythonRule<torch::optim::Adagrad>;

template <>
at::Tensor PythonAdam::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor PythonAdamW::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor PythonRmsProp::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor PythonAdagrad::step(torch::optim::Optimizer::LossClosure closure);

}  // namespace acc

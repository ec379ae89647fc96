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

#include "optim/rule_helpers.h"

namespace acc {

// torch::optim's optimizer `Base` with Python's step; each rule specialises step() (python_rules.cpp).
template <class Base>
class PythonRule final : public Base, public ForeachChoice {
 public:
  using Base::Base;
  at::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
};

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

// PyTorch's fused=True for SGD, Adam, AdamW and Adagrad: one ATen kernel (_fused_sgd_, _fused_adam_,
// _fused_adamw_, _fused_adagrad_) steps every parameter of a device and dtype, as torch.optim does
// with fused=True, so the updates are that kernel's to the bit (it rounds otherwise than the
// one-tensor and foreach rules). Options and state are torch::optim's, as for the unfused rules,
// so a checkpoint moves between the two; the state's step count, an integer here, is handed to the
// kernel as the float32 tensor PyTorch keeps. From PyTorch 2.4 (on CUDA and the CPU; Adagrad's
// kernel is the CPU's only, as in PyTorch).
#pragma once

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace acc {

// A rule that applies PyTorch's maximize itself, where its kernel does: the CUDA SGD kernel adds the
// step at the end instead of negating the gradient first, so with weight decay its maximize is not
// the negated gradient's minimisation (the decay's sign differs). TorchOptimizer then leaves the
// gradients as they are.
class MaximizeInRule {
 public:
  virtual ~MaximizeInRule() = default;
  void set_maximize(bool maximize) { maximize_ = maximize; }

 protected:
  bool maximize_ = false;
};

// torch::optim's optimizer `Base` stepped by PyTorch's fused kernel (fused_rules.cpp), which is handed
// maximize as torch.optim hands it.
template <class Base>
class FusedRule final : public Base, public MaximizeInRule {
 public:
  using Base::Base;
  at::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
};

using FusedSgd = FusedRule<torch::optim::SGD>;
using FusedAdam = FusedRule<torch::optim::Adam>;
using FusedAdamW = FusedRule<torch::optim::AdamW>;
using FusedAdagrad = FusedRule<torch::optim::Adagrad>;

template <>
at::Tensor FusedSgd::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor FusedAdam::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor FusedAdamW::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor FusedAdagrad::step(torch::optim::Optimizer::LossClosure closure);

}  // namespace acc

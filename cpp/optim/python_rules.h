// Adam, AdamW, RMSprop and Adagrad stepped as torch.optim's Python rules of the PyTorch version built
// against, op for op. torch::optim's C++ rules are not kept in step with Python's: from 2.0 Python
// updates Adam's first moment and RMSprop's centred average with lerp_ (C++ kept mul_ and add_, which
// rounds otherwise), and on CUDA Python steps with its foreach ops, which round otherwise than its
// one-tensor rule for Adam (the bias correction's division) and Adagrad (the step is scaled before
// the division, not after). Options and state stay
// torch::optim's, so everything that reads them (checkpoints, sharding, offload) is unchanged.
#pragma once

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>

namespace acc {

class PythonAdam final : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  at::Tensor step(LossClosure closure = nullptr) override;
};

class PythonAdamW final : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
};

class PythonRmsProp final : public torch::optim::RMSprop {
 public:
  using torch::optim::RMSprop::RMSprop;
  at::Tensor step(LossClosure closure = nullptr) override;
};

class PythonAdagrad final : public torch::optim::Adagrad {
 public:
  using torch::optim::Adagrad::Adagrad;
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace acc

// PyTorch's swa_utils.update_bn recomputes BatchNorm's running statistics over a pass of data as plain
// averages: it resets them and sets each layer's momentum to None for the pass, so that the k-th
// batch is weighted 1/k (a cumulative average), then gives the layers their momentum back. This does
// it to the torch::nn BatchNorm layers under a module, for as long as it lives.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/options/batchnorm.h>

#include <utility>
#include <vector>

namespace acc {

class CumulativeBatchNorm {
 public:
  // Resets the running statistics of every BatchNorm1d/2d under `root` (those that track them) and
  // makes them cumulative averages.
  explicit CumulativeBatchNorm(torch::nn::Module& root);
  // Gives each layer its momentum back.
  ~CumulativeBatchNorm();
  CumulativeBatchNorm(const CumulativeBatchNorm&) = delete;
  CumulativeBatchNorm& operator=(const CumulativeBatchNorm&) = delete;

  bool empty() const { return momenta_.empty(); }

 private:
  // Each layer's momentum option and the value it had.
  std::vector<std::pair<torch::nn::BatchNormOptions*, c10::optional<double>>> momenta_;
};

}  // namespace acc

// The ReLU MLP of mlp_spec (bench_util.h) as a torch::nn::Sequential, for the plain-libtorch baselines.
#pragma once

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"

inline torch::nn::Sequential mlp_module(const std::vector<int64_t>& widths) {
  torch::nn::Sequential net;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i) net->push_back(torch::nn::ReLU());
    net->push_back(torch::nn::Linear(widths[i], widths[i + 1]));
  }
  return net;
}

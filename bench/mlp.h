// Shared by the benchmarks: the same ReLU MLP as a C-API layer spec and as a torch::nn::Sequential.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accelerate.h"
#include "check.h"

inline std::string mlp_spec(const std::vector<int64_t>& widths) {
  std::string json = "[";
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i) json += R"(,{"type":"relu"},)";
    json += R"({"type":"linear","in_features":)" + std::to_string(widths[i]) + R"(,"out_features":)" +
            std::to_string(widths[i + 1]) + "}";
  }
  return json + "]";
}

inline torch::nn::Sequential mlp_module(const std::vector<int64_t>& widths) {
  torch::nn::Sequential net;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i) net->push_back(torch::nn::ReLU());
    net->push_back(torch::nn::Linear(widths[i], widths[i + 1]));
  }
  return net;
}

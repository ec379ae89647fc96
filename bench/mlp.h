// Shared by the benchmarks: the same ReLU MLP as a C-API layer spec and as a torch::nn::Sequential,
// and a check that stops the benchmark on a C-API error.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accelerate.h"

#define OK(expr)                                                                 \
  do {                                                                           \
    if ((expr) != ACC_OK) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #expr, acc_last_error_message());        \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

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

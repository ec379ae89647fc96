// LoRA-GA (Wang et al. 2024, "LoRA-GA: Low-Rank Adaptation with Gradient Approximation"), PEFT's
// preprocess_loraga and lora_ga_init: each targeted linear layer's weight gradient, averaged over
// the backward passes of a few training steps, is factored by torch.svd_lowrank (q = min(4 r, min
// dims), 4 iterations, drawing from the global generator), and the adapters start from 2 r of its
// singular vectors, so that the first step moves the adapted layer as full fine-tuning would; the
// weight keeps W - scaling B A. Model::begin_lora_ga / add_lora_ga estimate the gradients and hand
// them to LoraAdapters::add through LoraConfig::lora_ga_gradients.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "model/peft/lora_config.h"
#include "model/peft/lora_init.h"

namespace acc {

// Fails (InvalidArgument, naming `module`) unless 2 r singular vectors fit an out x in weight.
void require_lora_ga_rank(const std::string& module, int64_t out, int64_t in, int64_t r);

// PEFT's lora_ga_init: `weight` in nn.Linear's layout (out x in), `gradient` its averaged gradient in
// the same layout, `stored_rows` the stored weight's first size (PEFT's out_features, which is the
// input size of a Conv1D, whose weight is stored in x out). A, B and the residual weight in the
// weight's dtype. r at most half the weight's smaller size (InvalidArgument, naming `module`).
WeightDecomposition lora_ga_start(const std::string& module, const at::Tensor& weight, const at::Tensor& gradient,
                                  int64_t stored_rows, int64_t r, double scaling, const LoraGaConfig& config);

}  // namespace acc

// EVA (Paischer et al. 2024, "Explained Variance Adaptation"), PEFT's initialize_lora_eva_weights:
// each adapted linear layer's lora_A starts from the principal components of the inputs it sees on
// a data loader's batches, computed batch by batch (model/peft/incremental_pca.h) until they converge, and
// the layers' ranks are redistributed by how much of their inputs' variance their components explain.
// This file is PEFT's get_eva_state_dict: the data-driven half, given the layers and a forward.
// Model::initialize_lora_eva hands the result to the adapters (LoraAdapters::take_eva_components).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/option_table.h"
#include "model/output_adapter.h"
#include "model/peft/lora_config.h"

namespace acc {

// How EVA reads the loader's batches (ACC_OPTIONS_EVA): the forward takes the batch's first `inputs`
// fields; `labels` and `attention_mask` are fields (-1: none) that pick the positions whose inputs
// count, as PEFT's language-modelling defaults do (the attention mask's non-zero positions, without
// those whose label is eva_label_mask_value); with neither, every position of a layer's input counts
// (its leading dimensions flattened). On several processes each layer's inputs are gathered from
// all (gather_distributed_inputs). At most max_batches forward passes.
struct EvaReading {
  int64_t inputs = 1;
  int64_t labels = -1;
  int64_t attention_mask = -1;
  bool gather_distributed_inputs = true;
  int64_t max_batches = 10000;
};
const OptionTable<EvaReading>& eva_option_table();

// A layer EVA computes components for: its module's name, its rank (rank_pattern applied), its input
// features, and where its forward hands an OutputAdapter its input (the layer's own adapter is put
// back by the caller afterwards).
struct EvaLayer {
  std::string name;
  int64_t rank = 0;
  int64_t in_features = 0;
  std::function<void(OutputAdapter)> set_output_adapter;
};

// The data loader as PEFT's loop uses it: `next` gives the epoch's next batch (starting an epoch
// where none is under way, with its draws), nullopt at its end; `drop_iterator` ends an epoch left
// before its end (a dropped Python iterator); `length` is the batches per epoch (-1 unknown).
struct EvaSource {
  std::function<std::optional<std::vector<at::Tensor>>()> next;
  std::function<void()> drop_iterator;
  int64_t length = -1;
};

struct EvaJob {
  std::vector<EvaLayer> layers;  // in the model's module order
  EvaConfig config;
  EvaReading reading;
  int64_t r = 8;                       // the configuration's r (a rho above 1000 is capped by it)
  int64_t largest_parameter_size = 0;  // the largest size of any dimension of the model's parameters
  // Runs the model on a batch's inputs (evaluation mode, no gradients, adapters disabled).
  std::function<void(const std::vector<at::Tensor>&)> forward;
  // A layer's selected inputs (rows) from every process, concatenated in rank order (on one
  // process, the rows themselves).
  std::function<at::Tensor(const at::Tensor&)> gather_rows;
};

// PEFT's get_eva_state_dict: each layer's components, rank x in_features (rank 0: the layer keeps
// no adapter), by layer name. Layers whose inputs were equal on the first batch share the first
// one's computation (PEFT's HashHook). Fails (InvalidArgument) on an empty loader, a layer whose
// round(rank * rho) exceeds its input features, inputs the reading does not fit; and where
// max_batches pass without every layer converging. The loader's epoch is ended on the way out.
std::vector<std::pair<std::string, at::Tensor>> eva_components(const EvaJob& job, const EvaSource& source);

}  // namespace acc

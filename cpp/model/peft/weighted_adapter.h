// PEFT's add_weighted_adapter arithmetic (peft/tuners/lora/model.py): a new adapter combined from
// others, layer by layer: "cat" (stacked: the ranks add up); "linear", "ties", "dare_linear",
// "dare_ties", "magnitude_prune" (the As and the Bs merged apart, each weighted by the square root
// of |weight x scaling|, the sign on A: model/peft/task_merging.h); or any of those but cat with "_svd"
// ("svd" for linear's) — the layers' deltas merged with weight x scaling, then factored by
// torch.linalg.svd to the new rank.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/option_table.h"
#include "model/peft/lora.h"
#include "model/peft/task_merging.h"

namespace acc {

// add_weighted_adapter's keyword arguments beside the names and weights (ACC_OPTIONS_WEIGHTED_ADAPTER).
struct WeightedCombination {
  std::string combination_type = "svd";  // set from the call's argument, not an option
  int64_t svd_rank = 0;                  // 0: the largest of the adapters' ranks
  std::optional<double> svd_clamp;       // a quantile of U's and Vh's values both are clamped to
  bool svd_full_matrices = true;
  std::string svd_driver;         // cuSOLVER's (CUDA only); empty: torch's choice
  std::optional<double> density;  // the fraction the pruning combinations keep (required by them)
  std::string majority_sign_method = "total";

  // The settings for combining `adapters` adapters `combination_type`'s way: a single adapter is
  // combined "linear", as PEFT's; a pruning combination needs a density (PEFT fails without one).
  static WeightedCombination from(const std::string& combination_type, const Options& options, size_t adapters);
  // The merge of task tensors it asks for (its type without "_svd"; "svd" merges linearly).
  TaskMerge task_merge() const;
  bool factors() const;  // an svd combination
};

const OptionTable<WeightedCombination>& weighted_adapter_option_table();

// One adapter of the layer being combined, with the weight it is given.
struct WeightedSource {
  const LoraAdapter* adapter;
  double weight;
};

// The combined adapter's rank from the sources' ranks (PEFT's _check_add_weighted_adapter): cat adds
// them, svd combinations take svd_rank or else the largest, the others need them equal.
int64_t combined_rank(const WeightedCombination& how, const std::vector<int64_t>& ranks);

// Fails where `adapter` cannot be combined `how`'s way into an adapter of rank `rank` (before
// anything is drawn): an adapter of a parameter (InvalidArgument, as PEFT), an svd to a rank above
// the layer's delta's (InvalidArgument: PEFT fails in its matmul), of a convolution with groups, or
// an svd of a convolution that is not 2-D (Unsupported).
void check_combinable(const LoraAdapter& adapter, const WeightedCombination& how, int64_t rank);

// Writes the combined A and B of `target` (an adapter drawn for the layer with the combined rank)
// from `sources` (the layer's adapters among those combined, in the order given, each passed by
// check_combinable), as PEFT does; DARE's masks draw from the global generator in PEFT's order.
void combine_into(const LoraAdapter& target, const std::vector<WeightedSource>& sources,
                  const WeightedCombination& how);

}  // namespace acc

// PEFT's add_weighted_adapter arithmetic (peft/tuners/lora/model.py, utils/merge_utils.py): a new
// adapter combined from others, layer by layer, as "linear" (the As and the Bs summed, each weighted
// by the square root of |weight x scaling|, the sign on A), "cat" (stacked: the ranks add up) or
// "svd" (the weighted sum of the layers' deltas factored by torch.linalg.svd to the new rank).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "model/lora.h"

namespace acc {

// One adapter of the layer being combined, with the weight it is given.
struct WeightedSource {
  const LoraAdapter* adapter;
  double weight;
};

// The combined adapter's rank from the sources' ranks (PEFT's _check_add_weighted_adapter): linear
// needs them equal, cat adds them, svd takes `svd_rank` or else the largest. InvalidArgument for
// another combination (the ones PEFT has beyond these are Unsupported, named).
int64_t combined_rank(const std::string& combination, const std::vector<int64_t>& ranks, int64_t svd_rank);

// Fails where `adapter` cannot be combined `combination`'s way (before anything is drawn): an
// adapter of a parameter (InvalidArgument, as PEFT), of a convolution with groups, or an svd of a
// convolution that is not 2-D (Unsupported).
void check_combinable(const LoraAdapter& adapter, const std::string& combination);

// Writes the combined A and B of `target` (an adapter drawn for the layer with the combined rank)
// from `sources` (the layer's adapters among those combined, in the order given, each passed by
// check_combinable), as PEFT does.
void combine_into(const LoraAdapter& target, const std::vector<WeightedSource>& sources,
                  const std::string& combination);

}  // namespace acc

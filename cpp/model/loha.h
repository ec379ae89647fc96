// LoHa (Hyeon-Woo et al. 2022, FedPara; PEFT's LoHaConfig, from LyCORIS): a layer's weight W is
// trained as W + ((w1_a w1_b) * (w2_a w2_b)) * alpha / r, the Hadamard product of two rank-r
// products, W frozen; w1_a, w2_a (out x r) and w1_b, w2_b (r x in, a convolution's in its input
// channels per group times its kernel) new parameters. Computed as PEFT's loha.Linear, Conv1d and
// Conv2d compute it: the base layer's output plus the input through the delta (F.linear, or the
// layer's convolution), with rank_dropout and module_dropout in training, drawn where PEFT draws
// them. Lives in LoraAdapters (model/lora.h) as LoraAdapter entries whose `hada` is set.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/lora.h"

namespace acc {

// The factors' names after their module's (PEFT's ParameterDict entries, without the adapter name),
// in the order PEFT's layer registers them.
constexpr const char* kLohaSuffixes[] = {".hada_w1_a", ".hada_w1_b", ".hada_w2_a", ".hada_w2_b"};

// One adapter for each of `chosen` (in the model's order), drawn as PEFT's update_layer draws them
// from the global generator (Kaiming-uniform w1_a, w1_b, w2_a, then w2_b zero, or drawn too without
// init_weights), in the layer's dtype and float32 where that is half precision. Checks every site
// first, changing nothing: a layer PEFT's LoHa takes (nn.Linear, nn.Conv1d, nn.Conv2d, a spec's
// linear and conv2d), called as a module (Unsupported where the forward reads its weight itself,
// the layer is quantised, or use_effective_conv2d asks for the CP form of a wider kernel).
std::vector<LoraAdapter> make_loha_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The delta of the factors `hada` as PEFT's get_delta_weight makes it, in the weight's `shape`; in
// training (`training`) with rank dropout, its output rows dropped and the rest rescaled
// (torch.rand drawn).
at::Tensor loha_delta(const std::vector<at::Tensor>& hada, double scaling, c10::IntArrayRef shape, bool training,
                      double rank_dropout);

// PEFT's forward: in training, torch.rand(1) against module_dropout first; the output plus the
// input through the delta, cast to the input's dtype (also when disabled, as PEFT's layer casts).
OutputAdapter loha_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled);

}  // namespace acc

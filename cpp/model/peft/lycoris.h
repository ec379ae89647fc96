// The LyCORIS methods PEFT builds on its LycorisLayer: LoHa (model/peft/loha.h) and LoKr
// (model/peft/lokr.h). Each trains factors from which a delta of the layer's weight's shape is made; the
// layer computes its own output plus its input through that delta (F.linear, or the layer's
// convolution with its stride, padding, dilation and groups), with PEFT's module and rank dropout
// in training. What they share lives here: the adapters' making, their factors' names and shapes,
// the delta and the forward. They live in LoraAdapters (model/peft/lora.h) as LoraAdapter entries whose
// `factors` are set, so that listing, saving, merging, switching and sharding treat them alike.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

// The factors `config`'s method (LoHa or LoKr) gives the layer `site`, in the order PEFT's layer
// registers them (its parameters' order).
std::vector<FactorShape> lycoris_factor_shapes(const LoraConfig& config, const LinearSite& site);

// Every factor name the method can have (what a file of its adapters may hold).
std::vector<std::string> lycoris_suffixes(PeftType method);

// Where the factor names `suffixes` of one module are not a set the method makes: what is missing
// or too much ("" when they are one).
std::string lycoris_factor_set_error(PeftType method, const std::vector<std::string>& suffixes);

// One adapter for each of `chosen` (in the model's order), drawn as PEFT's update_layer draws them
// from the global generator, in the layer's dtype (float32 where that is half precision). Checks
// every site first, changing nothing: a layer PEFT's LyCORIS tuners take (nn.Linear, nn.Conv1d,
// nn.Conv2d, a spec's linear and conv2d), called as a module (Unsupported where the forward reads
// its weight itself, or the layer is quantised).
std::vector<LoraAdapter> make_lycoris_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// Training's rank dropout (PEFT's rank_dropout and LoKr's rank_dropout_scale): none by default.
struct RankDropout {
  double p = 0;
  bool scale = true;
};

// The delta of `factors` (an adapter's own, or a state's under the same names) of `method` (LoHa or
// LoKr) as PEFT's get_delta_weight makes it, in the weight's `shape`, with rank dropout where
// `dropout` has some (torch.rand drawn).
at::Tensor lycoris_delta(PeftType method, const NamedTensors& factors, double scaling, c10::IntArrayRef shape,
                         RankDropout dropout = {});

// PEFT's LycorisLayer forward: in training, torch.rand(1) against module_dropout first; the output
// plus the input through the delta, cast to the input's dtype (also when disabled, as PEFT's layer
// casts).
OutputAdapter lycoris_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                     std::shared_ptr<const bool> enabled);

}  // namespace acc

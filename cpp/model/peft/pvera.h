// PVeRA (PEFT's PveraConfig, "probabilistic VeRA"): VeRA's frozen projections shared by the targeted
// layers (model/peft/vera.h), pvera_A with 2 r rows, and VeRA's two trained vectors per layer,
// pvera_lambda_b (out) and pvera_lambda_d (2 r). The middle lambda_d * (A x) splits into a mean and a
// log-variance, and the layer adds lambda_b * (B z) with z sampled from them in training (mu + eps *
// exp(logvar / 2)), their mean otherwise. Computed as PEFT's pvera.Linear computes it (nn.Linear
// and transformers' Conv1D).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kPveraLambdaB = ".pvera_lambda_b";
constexpr const char* kPveraLambdaD = ".pvera_lambda_d";
constexpr const char* kPveraProjectionA = "base_model.pvera_A";
constexpr const char* kPveraProjectionB = "base_model.pvera_B";
constexpr const char* kPveraBufferA = "pvera_A";
constexpr const char* kPveraBufferB = "pvera_B";

// The vectors' names and shapes for the layer: pvera_lambda_b (out), pvera_lambda_d (2 r).
std::vector<FactorShape> pvera_factor_shapes(const LoraConfig& config, const LinearSite& site);

// The projections' shapes over the targeted layers: 2 r x the largest input, the largest output x r.
std::pair<std::vector<int64_t>, std::vector<int64_t>> pvera_projection_shapes(const LoraConfig& config,
                                                                              const std::vector<LinearSite>& chosen);

// One adapter for each of `chosen`, drawn as VeRA's (make_vector_adapters: the projections from a
// generator of their own seeded projection_prng_key, then torch.randn(2 r) per layer), each layer
// with a CPU generator of its own seeded generator_seed where one is given (PEFT's pvera_generator).
std::vector<LoraAdapter> make_pvera_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// PEFT's merge: w plus VeRA's delta from lambda_d's first half and A's first r rows (the mean), for a
// layer of `in_features` inputs.
at::Tensor pvera_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors);

// PEFT's forward: the output plus lambda_b * F.linear(z, B[:out]), z = mu (+ eps * exp(logvar / 2)
// in training or with sample_at_inference; eps torch.randn of mu's shape from the layer's generator,
// else the global one, after dropout's mask), mu and logvar the halves of lambda_d *
// F.linear(dropout(x), A[:, :in]); cast to the input's dtype (also when disabled).
OutputAdapter pvera_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                   std::shared_ptr<const bool> enabled);

}  // namespace acc

// VeRA (Kopiczko et al. 2024, "Vector-based Random Matrix Adaptation"; PEFT's VeraConfig): one pair
// of frozen random projections for all the targeted layers, vera_A (r x the largest input) and
// vera_B (the largest output x r), drawn from a generator of their own seeded projection_prng_key;
// each layer trains two vectors, vera_lambda_d (r) and vera_lambda_b (out), and computes its output
// plus lambda_b * (B[:out] (lambda_d * (A[:, :in] x))). Computed as PEFT's vera.Linear computes it
// (nn.Linear and transformers' Conv1D). The vectors live in LoraAdapter::factors, the projections in
// LoraAdapter::projections, shared by the adapter's layers.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

// The vectors' names after their module's (PEFT's ParameterDict entries, without the adapter name),
// in the order PEFT's layer registers them; the projections' names in PEFT's files.
constexpr const char* kVeraLambdaB = ".vera_lambda_b";
constexpr const char* kVeraLambdaD = ".vera_lambda_d";
constexpr const char* kVeraProjectionA = "base_model.vera_A";
constexpr const char* kVeraProjectionB = "base_model.vera_B";
// Their names in the model's state (state_dict, save_state), beside the model's own buffers.
constexpr const char* kVeraBufferA = "vera_A";
constexpr const char* kVeraBufferB = "vera_B";

struct VeraProjections {
  at::Tensor a, b;  // vera_A (r x in), vera_B (out x r), frozen
};

// The vectors' names and shapes for the layer: vera_lambda_b (out), vera_lambda_d (r).
std::vector<FactorShape> vera_factor_shapes(const LoraConfig& config, const LinearSite& site);

// The projections' shapes for `config` over the targeted layers: r x the largest input, the largest
// output x r (PEFT's _find_dim).
std::pair<std::vector<int64_t>, std::vector<int64_t>> vera_projection_shapes(const LoraConfig& config,
                                                                             const std::vector<LinearSite>& chosen);
// The same with `a_rows` rows in A (PVeRA's 2 r).
std::pair<std::vector<int64_t>, std::vector<int64_t>> projection_shapes_of(int64_t a_rows, int64_t r,
                                                                           const std::vector<LinearSite>& chosen);

// One adapter for each of `chosen` (in the model's order), sharing projections drawn as PEFT's
// _init_vera_A_vera_B draws them (Kaiming-uniform from a CPU generator seeded projection_prng_key,
// the global generator untouched), each layer's vectors as its update_layer makes them
// (torch.randn(r) from the global generator, then d_initial and zeros where init_weights). Checks
// every site first, changing nothing: nn.Linear, transformers' Conv1D or a spec's linear, called as
// a module (anything else InvalidArgument, as PEFT's TypeError; a quantised layer Unsupported).
std::vector<LoraAdapter> make_vera_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// VeRA's draws for a method of its family (`config.peft_type`; PVeRA's): the sites checked as VeRA's
// (the method named), projections of `shapes`, lambda_b (out) and lambda_d (`d_size`) named
// `suffix_b` and `suffix_d`.
struct VectorNames {
  const char* suffix_b;
  const char* suffix_d;
};
std::vector<LoraAdapter> make_vector_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen,
                                              VectorNames names, int64_t d_size,
                                              const std::pair<std::vector<int64_t>, std::vector<int64_t>>& shapes);

// The delta PEFT's get_delta_weight makes from `lambda_b`, `lambda_d` (an adapter's own or a
// state's) and the projections (A's first rows, as many as lambda_d has: PVeRA's mean half), for a
// layer of `in_features` inputs (the weight merged: whole where a stage 3 layer holds a slice), in
// the weight's layout (a Conv1D's transposed).
at::Tensor vera_delta(const LoraAdapter& adapter, const at::Tensor& lambda_b, const at::Tensor& lambda_d,
                      int64_t in_features);

// PEFT's vera.Linear forward: the output plus the branch, with vera_dropout on the input in
// training, cast to the output's dtype and then the input's (also when disabled).
OutputAdapter vera_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled);

}  // namespace acc

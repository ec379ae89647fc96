// LoKr (Yeh et al. 2023, "Navigating Text-To-Image Customization"; PEFT's LoKrConfig, from LyCORIS):
// a layer's weight W (out x in, out = a b, in = c d) is trained as W + kron(w1, w2) * alpha / r, W
// frozen: w1 (a x c) and w2 (b x d, a convolution's with its kernel) new parameters, each either
// whole or a rank-r product (w1_a w1_b, w2_a w2_b) where r is below half its larger side; a wider
// kernel's w2 can be PEFT's CP form (lokr_t2 with w2_a, w2_b). What is LoKr's own: the
// factorisation, its factors' shapes and draws, its delta and its rank dropout; the rest is
// LyCORIS' (model/peft/lycoris.h).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "model/peft/lycoris.h"

namespace acc {

// Every factor's name after its module's (PEFT's ParameterDict entries, without the adapter name),
// in the order PEFT's layer registers them.
constexpr const char* kLokrSuffixes[] = {".lokr_w1",   ".lokr_w1_a", ".lokr_w1_b", ".lokr_w2",
                                         ".lokr_w2_a", ".lokr_w2_b", ".lokr_t2"};

// LyCORIS' factorization: `dimension` as m x n, m <= n, m as near to `factor` as a divisor allows
// (-1: as near to the square root as possible; a positive factor dividing it is taken as it is).
std::pair<int64_t, int64_t> lokr_factorization(int64_t dimension, int64_t factor);

// The factors PEFT's update_layer makes for the layer with `config` (its rank_pattern's r,
// decompose_both, decompose_factor, use_effective_conv2d), in PEFT's registration order.
std::vector<FactorShape> lokr_factor_shapes(const LoraConfig& config, const LinearSite& site);

// PEFT's reset_adapter_parameters (init_weights true: w1 or w1_a zero), its _random form (false:
// all drawn) or its _lycoris_way (w2 or w2_b zero), in place on `factors`: every other factor
// Kaiming-uniform, in the registration order.
void draw_lokr_factors(const LoraConfig& config, NamedTensors& factors);

// Where `suffixes` (one module's factors) are not a set LoKr makes: what is missing or too much.
std::string lokr_factor_set_error(const std::vector<std::string>& suffixes);

// PEFT's make_kron(w1, w2, scaling), w1 and w2 whole or made from their factors (the CP form by
// torch.einsum's default order), not yet reshaped.
at::Tensor lokr_weight(const NamedTensors& factors, double scaling);

// PEFT's LoKr rank dropout on `weight` (the delta in its layer's shape): rows kept where torch.rand
// is above p, as float32, rescaled by the kept fraction only with rank_dropout_scale.
at::Tensor lokr_rank_dropout(const at::Tensor& weight, double p, bool scale);

}  // namespace acc

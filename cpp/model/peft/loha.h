// LoHa (Hyeon-Woo et al. 2022, FedPara; PEFT's LoHaConfig, from LyCORIS): a layer's weight W is
// trained as W + ((w1_a w1_b) * (w2_a w2_b)) * alpha / r, the Hadamard product of two rank-r
// products, W frozen; w1_a, w2_a (out x r) and w1_b, w2_b (r x in, a convolution's in its input
// channels per group times its kernel) new parameters. With use_effective_conv2d a convolution wider
// than 1 x 1 takes PEFT's CP form instead: each product rebuilt from a core t (r x r x kernel) and
// w_a (r x out), w_b (r x in). What is LoHa's own: its factors' shapes and draws, its delta and its
// rank dropout; the rest is LyCORIS' (model/peft/lycoris.h).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/peft/lycoris.h"

namespace acc {

// The factors' names after their module's (PEFT's ParameterDict entries, without the adapter name),
// in the order PEFT's layer registers them; the last two, the CP form's cores, only with it.
constexpr const char* kLohaSuffixes[] = {".hada_w1_a", ".hada_w1_b", ".hada_w2_a",
                                         ".hada_w2_b", ".hada_t1",   ".hada_t2"};

// w1_a and w2_a out x r, w1_b and w2_b r x in (a convolution's in: its kernel's size times its input
// channels per group); in the CP form (use_effective_conv2d on a kernel wider than 1) w1_a, w2_a
// r x out, w1_b, w2_b r x in, hada_t1, hada_t2 r x r x kernel (a 1-D kernel's k x 1).
std::vector<FactorShape> loha_factor_shapes(const LoraConfig& config, const LinearSite& site);

// PEFT's reset_adapter_parameters, in place on `factors` (loha_factor_shapes' float32 tensors), in
// their order: Kaiming-uniform, but w2_b zero (drawn too without init_weights).
void draw_loha_factors(const LoraConfig& config, NamedTensors& factors);

// Where `suffixes` (one module's factors) are not a set LoHa makes: what is missing.
std::string loha_factor_set_error(const std::vector<std::string>& suffixes);

// PEFT's make_weight: ((w1_a @ w1_b) * (w2_a @ w2_b)) * torch.tensor(scaling), or make_weight_cp
// with its hand-written backward (HadaWeightCP), not yet reshaped.
at::Tensor loha_weight(const NamedTensors& factors, double scaling);

// PEFT's LoHa rank dropout on `weight` (the delta in its layer's shape): rows kept where torch.rand
// is above p, in the delta's dtype, rescaled by the kept fraction.
at::Tensor loha_rank_dropout(const at::Tensor& weight, double p);

}  // namespace acc

// HRA (Yuan et al. 2024, "Bridging The Gap between Low-rank and Orthogonal Adaptation via
// Householder Reflection Adaptation"; PEFT's HRAConfig): each targeted layer's weight is multiplied
// from the right by r Householder reflections, H = prod_i (I - 2 u_i u_i^T) with u_i the columns of
// hra_u (in x r; a convolution's in * kernel^2 x r) normalised, or (apply_GS) by I - 2 U U^T with U
// hra_u orthonormalised by Gram-Schmidt. The layer computes with W H (a convolution with W viewed as
// out x in * kernel^2), W frozen, as PEFT's hra.Linear and hra.Conv2d compute it. The tensor lives in
// LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kHraU = ".hra_u";

// hra_u: the layer's unrolled input (in, or in * kernel^2) x r.
std::vector<FactorShape> hra_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), drawn from the global generator as PEFT
// draws: with init_weights and an even r, kaiming_uniform_(a = sqrt(5)) of in x r/2, each column
// repeated (pairs of equal reflections: H = I); otherwise of in x r. Checks every site first,
// changing nothing: nn.Linear or a spec's linear, or nn.Conv2d of a square kernel, one stride and one
// padding, without dilation or groups, and one the forward calls as a module; transformers' Conv1D,
// an embedding or an attention is InvalidArgument (PEFT's TypeError), a quantised layer or another
// convolution Unsupported.
std::vector<LoraAdapter> make_hra_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// H (PEFT's get_delta_weight) from `hra_u`, in its dtype.
at::Tensor hra_rotation(const at::Tensor& hra_u, bool apply_gs);

// The layer's weight `w` merged: W H (a convolution's viewed as out x in * kernel^2), in H's dtype,
// rounded to W's.
at::Tensor hra_merged_weight(const at::Tensor& w, const at::Tensor& hra_u, bool apply_gs);

// The layer computed with W H in place of W (its bias as it is), as PEFT's forward; its output
// unchanged while disabled.
OutputAdapter hra_output_adapter(const LoraAdapter& adapter, bool apply_gs, std::shared_ptr<const bool> enabled);

}  // namespace acc

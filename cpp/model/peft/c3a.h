// C3A (Chen et al. 2024, "Parameter-Efficient Fine-Tuning via Circular Convolution"; PEFT's
// C3AConfig): each targeted linear layer trains a kernel, "<module>.c3a_kernel" (out/b x in/b x b,
// b the block size), and adds its input convolved circularly, block by block, with the kernel (by
// FFTs), divided by the input's width: the delta is a block circulant matrix. As PEFT's
// c3a.C3ALinear computes it (its BlockCircularConvolution, hand-written backward included), on
// nn.Linear. The tensor lives in LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kC3aKernel = ".c3a_kernel";

// c3a_kernel: out/b x in/b x b, b the layer's block size (block_size_pattern's where it names it).
std::vector<FactorShape> c3a_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), drawn from the global generator as PEFT
// draws (init_weights: uniform within sqrt(6 / (in + out)) or sqrt(1 / in), normal, or zeros).
// Checks every site first, changing nothing: nn.Linear or a spec's linear the forward calls as a
// module (a convolution, transformers' Conv1D, an embedding or an attention is InvalidArgument,
// PEFT's TypeError; a quantised layer Unsupported), whose inputs and outputs the block size divides
// (PEFT's ValueError: InvalidArgument).
std::vector<LoraAdapter> make_c3a_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The layer's weight `w` (out x in) merged: W plus the kernel's block circulant matrix (computed in
// float32, in W's dtype) over in.
at::Tensor c3a_merged_weight(const at::Tensor& w, const at::Tensor& kernel);

// The layer's forward as PEFT's: its output plus the circular convolution of its input (float32)
// with the kernel over the input's width, in the output's dtype; the result in the input's dtype,
// also while disabled (its output unchanged then).
OutputAdapter c3a_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                 std::shared_ptr<const bool> enabled);

}  // namespace acc

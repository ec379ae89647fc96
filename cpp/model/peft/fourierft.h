// FourierFT (Gao et al. 2024, "Parameter-Efficient Fine-Tuning with Discrete Fourier Transform";
// PEFT's FourierFTConfig): each targeted layer trains n_frequency entries of its weight's spectrum,
// "<module>.fourierft_spectrum" (n_frequency), at places drawn once by torch.randperm from
// random_loc_seed; the layer adds x times the real part of the inverse 2-D FFT of that sparse out x in
// spectrum, scaled, W frozen. As PEFT's fourierft.FourierFTLinear computes it, on nn.Linear and
// transformers' Conv1D. The tensor lives in LoraAdapter::factors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

constexpr const char* kFourierSpectrum = ".fourierft_spectrum";

// fourierft_spectrum: the layer's n_frequency (n_frequency_pattern's where it names the layer).
std::vector<FactorShape> fourierft_factor_shapes(const LoraConfig& config, const LinearSite& site);

// One adapter for each of `chosen` (in the model's order), drawn as PEFT draws: torch.randn of
// n_frequency from the global generator (zeros after it with init_weights). Checks every site first,
// changing nothing: nn.Linear, a spec's linear or transformers' Conv1D, called as a module; a
// convolution, an embedding or an attention is InvalidArgument (PEFT's TypeError), as is an
// n_frequency above the weight's entries; a quantised layer, or one whose weight the forward reads
// itself, Unsupported.
std::vector<LoraAdapter> make_fourierft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen);

// The delta (out x in, nn.Linear's layout) of `spectrum` for a layer of that shape: PEFT's
// get_delta_weight, the places drawn from `config`'s random_loc_seed. (The shape is the caller's: the
// weight merged, whole where a stage 3 layer holds a slice.)
at::Tensor fourierft_delta(const at::Tensor& spectrum, int64_t out, int64_t in, const LoraConfig& config);

// The layer's output plus its input through the delta, cast to the input's dtype (disabled too), as
// PEFT's forward.
OutputAdapter fourierft_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                       std::shared_ptr<const bool> enabled);

}  // namespace acc

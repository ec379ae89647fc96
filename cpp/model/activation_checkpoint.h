// Activation checkpointing for one layer (torch.utils.checkpoint's idea): the forward keeps no
// activations, only the layer's input; the backward runs the layer's forward again from that input,
// with history, and backpropagates through it. The random state the first forward started from is
// restored for the second, so dropout draws the same mask and the gradients equal the plain run's
// bit for bit. It costs a second forward per checkpointed layer.
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace acc {

using LayerForward = std::function<at::Tensor(const at::Tensor&)>;

// `layer` applied to `input`, checkpointed when autograd records (otherwise a plain call). Layers
// over integer inputs (embeddings) run plainly: there is no input gradient to carry.
at::Tensor checkpointed_forward(const LayerForward& layer, const at::Tensor& input);

}  // namespace acc

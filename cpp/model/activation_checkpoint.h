// Activation checkpointing for one layer (torch.utils.checkpoint's idea): the forward keeps no
// activations, only the layer's inputs; the backward runs the layer's forward again from that input,
// with history, and backpropagates through it. The random state the first forward started from is
// restored for the second, so dropout draws the same mask and the gradients equal the plain run's
// bit for bit. It costs a second forward per checkpointed layer.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace acc {

using LayerForward = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// `layer` applied to `inputs`, checkpointed when autograd records (otherwise a plain call). Layers
// over integer inputs only (embeddings) run plainly: there is no input gradient to carry.
at::Tensor checkpointed_forward(const LayerForward& layer, const std::vector<at::Tensor>& inputs);

}  // namespace acc

// Activation checkpointing for one layer (torch.utils.checkpoint's idea): the forward keeps no
// activations, only the layer's inputs; the backward runs the layer's forward again from that input,
// with history, and backpropagates through it. The random state the first forward started from is
// restored for the second, so dropout draws the same mask and the gradients equal the plain run's
// bit for bit. It costs a second forward per checkpointed layer.
//
// The recomputation's gradients for the layer's parameters are not accumulated there: they are
// handed back to the outer backward as the node's outputs, which accumulates them as for any other
// layer. So the parameters' gradient hooks (DDP's Reducer, the sharding engine) fire in the outer
// backward, once each, and multi-process training works with checkpointed layers.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace acc {

using LayerForward = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// `layer` applied to `inputs`, checkpointed when autograd records (otherwise a plain call). Layers
// over integer inputs only (embeddings) run plainly: there is no input gradient to carry.
// `parameters`: every tensor requiring a gradient that the layer computes with besides its inputs
// (a parameter left out would get no gradient).
at::Tensor checkpointed_forward(const LayerForward& layer, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& parameters);

}  // namespace acc

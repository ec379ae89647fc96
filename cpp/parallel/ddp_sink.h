// PyTorch DDP's output sink (_DDPSink): a training forward's outputs pass through one autograd node.
// Its backward is where DDP (1) hands an output that the loss does not use a null gradient, so
// that with find_unused_parameters the parameters behind it still report to the Reducer (without
// it their buckets are never ready and the processes' gradients are silently not averaged), and
// (2) queues the static graph's one delayed allreduce at the end of the first backward.
#pragma once

#include <functional>

#include "tensor/named_tensors.h"

namespace acc {

// The outputs that carry autograd history, cloned through one node whose backward passes each
// gradient on as it came (null included) after calling `on_backward` (on the engine's thread,
// inside backward: Engine::queue_callback works there). Outputs without history are returned as
// they are (pytorch#60733).
NamedTensors through_ddp_sink(const NamedTensors& outputs, std::function<void()> on_backward);

}  // namespace acc

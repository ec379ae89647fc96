// What a spec layer's weights take, from its spec alone, before anything is allocated: a layer (or
// a model) larger than the memory the machine has left is refused up front instead of being
// allocated until the system kills the process.
#pragma once

#include <string>
#include <vector>

#include "model/layers.h"

namespace acc {

// The bytes of the layer's parameters and buffers as build_layer makes them (float32, BatchNorm's
// step count int64; a tied head's bias, its embedding's size, not counted). A double: the sizes a
// spec may name overflow 64 bits.
double layer_weight_bytes(const LayerSpec& spec);

// Fails (OutOfMemory, naming `what` and both sizes) where `bytes` exceed the memory this machine
// has left for them (Linux's MemAvailable plus free swap; no check where that cannot be read, nor
// past 64 bits, which building the layer refuses as sizes).
void require_memory_for(double bytes, const std::string& what);

// The check for a spec model's layers: all their weights, or with `weights_pending` (each layer's
// go as soon as it is made) the largest layer's, named.
void require_memory_for_layers(const std::vector<LayerSpec>& layers, bool weights_pending);

}  // namespace acc

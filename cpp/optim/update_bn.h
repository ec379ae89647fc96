// PyTorch's torch.optim.swa_utils.update_bn(loader, model, device): after training with averaged
// weights (SWA), BatchNorm's running statistics belong to the weights they were gathered with, so
// they are recomputed over a pass of data with the averaged weights in place.
#pragma once

#include "data/dataloader.h"
#include "model/model.h"

namespace acc {

// One epoch of `loader` (between epochs: it starts the next one, as iterating a Python DataLoader
// does), each batch's first field moved to the model's device and run forward in training mode
// without autograd, while every BatchNorm layer averages its statistics over the pass (each batch
// weighted equally: momentum None). Then the layers have their momentum, and the model its mode,
// back. A model without BatchNorm layers is left alone and the loader is not read. A prepared model
// runs its inner model (its process's own statistics, no buffer broadcast).
void update_bn(Model& model, DataLoader& loader);

}  // namespace acc

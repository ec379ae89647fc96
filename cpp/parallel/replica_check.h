// Every process must prepare the same model: PyTorch's DDP compares parameter shapes across
// processes when it is built. Without it, the first broadcast sends tensors of other sizes, and
// Gloo aborts a process from its own thread or hands garbage on.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "state/distributed.h"

namespace acc {

// InvalidArgument on every process, naming the first difference, unless every process's model has
// the same parameters and buffers (names, in order, shapes, dtypes, which ones train). A collective.
void check_same_model_everywhere(const Model& model, const std::shared_ptr<Distributed>& dist, const std::string& what);

}  // namespace acc

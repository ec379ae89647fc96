// Tensors with names, in order: state dicts, forward outputs, checkpoint contents.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace acc {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace acc

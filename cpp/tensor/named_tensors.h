// Tensors with names, in order: state dicts, forward outputs, checkpoint contents.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace acc {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// `tensors` with each tensor under its first name only: a weight or buffer several modules share (a
// tied head, one mask held by two layers) is saved once, as Accelerate's save_model and save_state
// (clean_state_dict_for_safetensors) keep it.
NamedTensors without_aliases(const NamedTensors& tensors);
// Whether `a` and `b` are one tensor's entries (the same memory, shape, strides and dtype; an empty
// tensor is no alias).
bool are_aliases(const at::Tensor& a, const at::Tensor& b);

}  // namespace acc

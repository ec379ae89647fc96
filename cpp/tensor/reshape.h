// torch.reshape with its argument checked first: one -1 at most (inferred), every other size
// positive or zero, and the element count kept; a mismatch is InvalidArgument naming both shapes.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace acc {

at::Tensor checked_reshape(const at::Tensor& x, at::IntArrayRef shape);

}  // namespace acc

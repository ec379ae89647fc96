// Stand-in for a libtorch header that Debian's libtorch-dev does not ship, but which c10d's
// reducer.hpp includes. The Reducer only holds a shared_ptr to this type (for RPC-based distributed
// autograd, which this library does not use), so the type's name and GradCallback are all that is
// needed: a shared_ptr has the same layout whatever it points to. CMake puts this directory on the
// include path only when the real header is missing.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch

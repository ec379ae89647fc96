// Making autograd nodes of our own (a checkpointed layer's backward, DDP's output sink) the way
// libtorch's own functions are made, on every libtorch version this builds against.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace acc {

// Nodes are shared_ptr in libtorch 1.13-2.x and intrusive_ptr in later ones.
using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()));

template <class T>
auto make_node() {
  // deleteNode (libtorch's non-recursive deleter for shared_ptr nodes) is found through T's base
  // when this branch is instantiated: later libtorch versions, which take the other, have none.
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>)
    return std::shared_ptr<T>(new T(), [](T* node) { deleteNode(node); });
  else
    return c10::make_intrusive<T>();
}

}  // namespace acc

#include "model/activation_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <type_traits>
#include <utility>


namespace acc {
namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

// The backward of a checkpointed layer: recompute, then backpropagate into the layer's parameters
// (their gradients accumulate as in the plain run) and return the inputs' gradients.
struct CheckpointBackward final : Node {
  LayerForward layer;
  std::vector<at::Tensor> inputs;  // detached
  std::vector<bool> requires_grad;
  at::Generator generator;  // the first input's device's default generator (dropout draws from it)
  at::Tensor random_state;  // its state when the forward began

  variable_list apply(variable_list&& grads) override {
    const at::Tensor now = generator.get_state();
    generator.set_state(random_state);
    std::vector<at::Tensor> xs;
    for (size_t i = 0; i < inputs.size(); ++i) xs.push_back(inputs[i].detach().requires_grad_(requires_grad[i]));
    at::Tensor y;
    {
      at::AutoGradMode with_history(true);
      y = layer(xs);
    }
    generator.set_state(now);
    at::Tensor grad = grads[0].defined() ? grads[0] : at::zeros_like(y);
    if (y.requires_grad()) torch::autograd::backward({y}, {grad});
    variable_list out;
    for (size_t i = 0; i < xs.size(); ++i) out.push_back(requires_grad[i] ? xs[i].grad() : at::Tensor());
    return out;
  }
  void release_variables() override {
    inputs.clear();
    random_state.reset();
  }
};

// Nodes are shared_ptr in libtorch 1.13-2.x and intrusive_ptr in later ones.
using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()));

template <class T>
auto make_node() {
  // deleteNode (libtorch's non-recursive deleter for shared_ptr nodes) is found through T's base
  // when this branch is instantiated: later libtorch versions, which take the other, have none.
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<Node>>)
    return std::shared_ptr<T>(new T(), [](T* node) { deleteNode(node); });
  else return c10::make_intrusive<T>();
}

}  // namespace

at::Tensor checkpointed_forward(const LayerForward& layer, const std::vector<at::Tensor>& inputs) {
  const bool floating = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.is_floating_point(); });
  if (!at::GradMode::is_enabled() || !floating) return layer(inputs);
  auto node = make_node<CheckpointBackward>();
  node->layer = layer;
  for (const auto& input : inputs) {
    node->inputs.push_back(input.detach());
    node->requires_grad.push_back(input.requires_grad());
  }
  node->generator = at::globalContext().defaultGenerator(inputs[0].device());
  node->random_state = node->generator.get_state();
  at::Tensor output;
  {
    at::NoGradGuard no_history;
    output = layer(inputs);
  }
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  torch::autograd::set_history(output, NodePtr(node));
  return output;
}

}  // namespace acc

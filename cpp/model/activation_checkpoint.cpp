#include "model/activation_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>

#include <type_traits>
#include <utility>


namespace acc {
namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

// The backward of a checkpointed layer: recompute, then backpropagate into the layer's parameters
// (their gradients accumulate as in the plain run) and return the input's gradient.
struct CheckpointBackward final : Node {
  LayerForward layer;
  at::Tensor input;  // detached
  bool input_requires_grad = false;
  at::Generator generator;  // the input device's default generator (dropout draws from it)
  at::Tensor random_state;  // its state when the forward began

  variable_list apply(variable_list&& grads) override {
    const at::Tensor now = generator.get_state();
    generator.set_state(random_state);
    at::Tensor x = input.detach().requires_grad_(input_requires_grad);
    at::Tensor y;
    {
      at::AutoGradMode with_history(true);
      y = layer(x);
    }
    generator.set_state(now);
    at::Tensor grad = grads[0].defined() ? grads[0] : at::zeros_like(y);
    if (y.requires_grad()) torch::autograd::backward({y}, {grad});
    return {input_requires_grad ? x.grad() : at::Tensor()};
  }
  void release_variables() override {
    input.reset();
    random_state.reset();
  }
};

// Nodes are shared_ptr in libtorch 1.13-2.x and intrusive_ptr in later ones.
using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()));

template <class T>
auto make_node() {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<Node>>) return std::shared_ptr<T>(new T(), torch::autograd::deleteNode);
  else return c10::make_intrusive<T>();
}

}  // namespace

at::Tensor checkpointed_forward(const LayerForward& layer, const at::Tensor& input) {
  if (!at::GradMode::is_enabled() || !input.is_floating_point()) return layer(input);
  auto node = make_node<CheckpointBackward>();
  node->layer = layer;
  node->input = input.detach();
  node->input_requires_grad = input.requires_grad();
  node->generator = at::globalContext().defaultGenerator(input.device());
  node->random_state = node->generator.get_state();
  at::Tensor output;
  {
    at::NoGradGuard no_history;
    output = layer(input);
  }
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  torch::autograd::set_history(output, NodePtr(node));
  return output;
}

}  // namespace acc

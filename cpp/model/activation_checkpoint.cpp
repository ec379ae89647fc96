#include "model/activation_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "common/autocast_guard.h"
#include "common/autograd_node.h"

namespace acc {
namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

// The backward of a checkpointed layer: recompute, then the gradients of the inputs and parameters,
// returned along the node's edges (the parameters' lead to their accumulators in the outer backward).
struct CheckpointBackward final : Node {
  LayerForward layer;
  std::vector<at::Tensor> inputs;  // detached
  std::vector<bool> requires_grad;
  std::vector<at::Tensor> parameters;  // the live tensors the layer computes with
  at::Generator generator;  // the first input's device's default generator (dropout draws from it)
  at::Tensor random_state;  // its state when the forward began
  // The forward's autocast (mixed precision), which the recomputation runs under too, as
  // torch.utils.checkpoint's.
  std::optional<c10::ScalarType> cpu_autocast, cuda_autocast;

  variable_list apply(variable_list&& grads) override {
    AutocastGuard cpu(c10::DeviceType::CPU, cpu_autocast);
    AutocastGuard cuda(c10::DeviceType::CUDA, cuda_autocast);
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
    variable_list out(inputs.size() + parameters.size());
    if (!y.requires_grad()) return out;
    // autograd::grad captures the gradients of `wrt` instead of accumulating them.
    std::vector<at::Tensor> wrt;
    std::vector<size_t> slot;
    for (size_t i = 0; i < xs.size(); ++i)
      if (requires_grad[i]) wrt.push_back(xs[i]), slot.push_back(i);
    for (size_t k = 0; k < parameters.size(); ++k) wrt.push_back(parameters[k]), slot.push_back(inputs.size() + k);
    if (wrt.empty()) return out;
    const at::Tensor grad = grads[0].defined() ? grads[0] : at::zeros_like(y);
    const auto computed = torch::autograd::grad({y}, wrt, {grad}, /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    for (size_t n = 0; n < computed.size(); ++n) out[slot[n]] = computed[n];
    return out;
  }
  void release_variables() override {
    inputs.clear();
    parameters.clear();
    random_state.reset();
  }
};

}  // namespace

at::Tensor checkpointed_forward(const LayerForward& layer, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& parameters) {
  const bool floating = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.is_floating_point(); });
  if (!at::GradMode::is_enabled() || !floating) return layer(inputs);
  auto node = make_node<CheckpointBackward>();
  node->layer = layer;
  for (const auto& input : inputs) {
    node->inputs.push_back(input.detach());
    node->requires_grad.push_back(input.requires_grad());
  }
  for (const auto& p : parameters)
    if (p.requires_grad()) node->parameters.push_back(p);
  node->generator = at::globalContext().defaultGenerator(inputs[0].device());
  node->random_state = node->generator.get_state();
  node->cpu_autocast = current_autocast(c10::DeviceType::CPU);
  node->cuda_autocast = current_autocast(c10::DeviceType::CUDA);
  at::Tensor output;
  {
    at::NoGradGuard no_history;
    output = layer(inputs);
  }
  auto edges = torch::autograd::collect_next_edges(inputs);
  for (const auto& edge : torch::autograd::collect_next_edges(node->parameters)) edges.push_back(edge);
  node->set_next_edges(std::move(edges));
  torch::autograd::set_history(output, NodePtr(node));
  return output;
}

}  // namespace acc

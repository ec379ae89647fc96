#include "parallel/ddp_sink.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <utility>

#include "common/autograd_node.h"

namespace acc {
namespace {

struct DdpSinkBackward final : torch::autograd::Node {
  std::function<void()> on_backward;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (on_backward) on_backward();
    return std::move(grads);
  }
};

}  // namespace

NamedTensors through_ddp_sink(const NamedTensors& outputs, std::function<void()> on_backward) {
  NamedTensors passed = outputs;
  std::vector<size_t> sunk;
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].second.defined() && outputs[i].second.grad_fn()) {
      sunk.push_back(i);
      inputs.push_back(outputs[i].second);
    }
  if (sunk.empty()) return passed;
  auto node = make_node<DdpSinkBackward>();
  node->on_backward = std::move(on_backward);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (size_t i : sunk) {
    at::Tensor copy;
    {
      at::NoGradGuard no_history;
      copy = outputs[i].second.clone();
    }
    torch::autograd::set_history(copy, NodePtr(node));
    passed[i].second = std::move(copy);
  }
  return passed;
}

}  // namespace acc

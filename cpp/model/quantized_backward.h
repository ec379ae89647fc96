// What the backwards of quantised layers share (four_bit_linear.cpp, eight_bit_linear.cpp): the
// bias's gradient as bitsandbytes computes it, and the wiring of a node of our own behind an output
// computed without history.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <vector>

#include "common/autograd_node.h"

namespace acc {

// A quantised layer's backward node: the input's gradient (output 0) by the kind's own rule, the
// bias's (output 1) by this.
struct QuantizedLinearBackward : torch::autograd::Node {
  at::ScalarType bias_dtype = at::kFloat;
  std::vector<int64_t> bias_sizes;

  // bitsandbytes' grad_output.sum(0, dtype=the bias's), then summed to the bias's shape, as the
  // engine would (bitsandbytes' CPU training path of 8-bit layers leaves it misshapen for inputs of
  // more than two dimensions).
  at::Tensor bias_gradient(const at::Tensor& grad) const { return at::sum_to(grad.sum(0, false, bias_dtype), bias_sizes); }
};

// Gives `output`, computed from `input` and `bias` (undefined: none) without history, a node of
// type T (filled by `fill`) as its backward, where either needs a gradient.
template <class T, class Fill>
void set_quantized_history(at::Tensor& output, const at::Tensor& input, const at::Tensor& bias, Fill&& fill) {
  if (!torch::autograd::compute_requires_grad(input, bias)) return;
  auto node = make_node<T>();
  fill(*node);
  if (bias.defined()) {
    node->bias_dtype = bias.scalar_type();
    node->bias_sizes = bias.sizes().vec();
  }
  node->set_next_edges(torch::autograd::collect_next_edges(input, bias));
  torch::autograd::set_history(output, NodePtr(node));
}

}  // namespace acc

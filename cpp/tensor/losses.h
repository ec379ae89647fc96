// The losses a training loop needs, with argument checks that name the problem.
#pragma once

#include <ATen/ATen.h>

#include "tensor/reduction.h"

namespace acc {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, Reduction reduction,
                         double label_smoothing);
at::Tensor nll_loss(const at::Tensor& log_probs, const at::Tensor& target, Reduction reduction);
at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction);
at::Tensor bce_with_logits(const at::Tensor& logits, const at::Tensor& target, Reduction reduction);

// What backward needs of a loss: one element, with autograd history.
void require_backward_loss(const at::Tensor& loss);

}  // namespace acc

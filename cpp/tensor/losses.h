// The losses a training loop needs, with argument checks that name the problem.
#pragma once

#include <ATen/ATen.h>

#include "tensor/reduction.h"

namespace acc {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, Reduction reduction,
                         double label_smoothing);
at::Tensor nll_loss(const at::Tensor& log_probs, const at::Tensor& target, Reduction reduction);
at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction);
at::Tensor l1_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction);
// beta >= 0 (0: the L1 loss), as torch's smooth_l1_loss.
at::Tensor smooth_l1_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction, double beta);
// delta > 0, as torch's huber_loss.
at::Tensor huber_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction, double delta);
at::Tensor bce_with_logits(const at::Tensor& logits, const at::Tensor& target, Reduction reduction);

// What backward needs of a loss: one element, with autograd history.
void require_backward_loss(const at::Tensor& loss);

}  // namespace acc

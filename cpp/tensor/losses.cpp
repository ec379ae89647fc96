#include "tensor/losses.h"

#include "common/error.h"

namespace acc {
namespace {

constexpr int64_t kIgnoreIndex = -100;

int64_t to_aten(Reduction r) {
  switch (r) {
    case Reduction::None: return at::Reduction::None;
    case Reduction::Mean: return at::Reduction::Mean;
    case Reduction::Sum: return at::Reduction::Sum;
  }
  fail(Status::InvalidArgument, "unknown reduction ", static_cast<int>(r));
}

// `alternative`: what else the loss takes as its target, for the refusal's message.
void require_class_targets(const at::Tensor& scores, const at::Tensor& target, const char* what,
                           const char* alternative = "") {
  require(scores.is_floating_point(), what, ": scores must be a floating tensor, got ", scores.scalar_type());
  require(scores.dim() >= 1, what, ": scores must have a class dimension");
  require(target.scalar_type() == at::kLong, what, ": target must hold int64 class indices", alternative, ", got ",
          target.scalar_type(), " of shape ", target.sizes(), " for scores of shape ", scores.sizes());
  const bool batched = scores.dim() >= 2;
  require(target.dim() == scores.dim() - 1 && (!batched || target.size(0) == scores.size(0)), what,
          ": target of shape ", target.sizes(), " does not fit scores of shape ", scores.sizes(),
          " (expected [N] for [N, C])");
  require(scores.device() == target.device(), what, ": scores are on ", scores.device(), " but target on ",
          target.device());
}

void require_same_shape(const at::Tensor& a, const at::Tensor& b, const char* what) {
  require(a.sizes() == b.sizes(), what, ": input shape ", a.sizes(), " and target shape ", b.sizes(), " differ");
  require(a.is_floating_point() && b.is_floating_point(), what, ": input and target must be floating tensors");
  require(a.device() == b.device(), what, ": input is on ", a.device(), " but target on ", b.device());
}

}  // namespace

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target, Reduction reduction,
                         double label_smoothing) {
  // A floating target of the logits' shape holds class probabilities (soft labels), as PyTorch takes it.
  if (target.is_floating_point() && target.sizes() == logits.sizes()) {
    require_same_shape(logits, target, "cross_entropy");  // floating, on one device
    require(logits.dim() >= 1, "cross_entropy: logits must have a class dimension");
  } else {
    require_class_targets(logits, target, "cross_entropy", " (or class probabilities of the logits' shape)");
  }
  require(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
          label_smoothing);
  return at::cross_entropy_loss(logits, target, {}, to_aten(reduction), kIgnoreIndex, label_smoothing);
}

at::Tensor nll_loss(const at::Tensor& log_probs, const at::Tensor& target, Reduction reduction) {
  require_class_targets(log_probs, target, "nll_loss");
  return at::nll_loss_nd(log_probs, target, {}, to_aten(reduction), kIgnoreIndex);
}

at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction) {
  require_same_shape(input, target, "mse_loss");
  return at::mse_loss(input, target, to_aten(reduction));
}

at::Tensor l1_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction) {
  require_same_shape(input, target, "l1_loss");
  return at::l1_loss(input, target, to_aten(reduction));
}

at::Tensor smooth_l1_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction, double beta) {
  require_same_shape(input, target, "smooth_l1_loss");
  require(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);  // NaN fails too
  return at::smooth_l1_loss(input, target, to_aten(reduction), beta);
}

at::Tensor huber_loss(const at::Tensor& input, const at::Tensor& target, Reduction reduction, double delta) {
  require_same_shape(input, target, "huber_loss");
  require(delta > 0, "huber_loss: delta must be > 0, got ", delta);  // NaN fails too
  return at::huber_loss(input, target, to_aten(reduction), delta);
}

at::Tensor bce_with_logits(const at::Tensor& logits, const at::Tensor& target, Reduction reduction) {
  require_same_shape(logits, target, "bce_with_logits");
  return at::binary_cross_entropy_with_logits(logits, target, {}, {}, to_aten(reduction));
}

void require_backward_loss(const at::Tensor& loss) {
  require(loss.defined() && loss.numel() == 1, "backward needs a scalar loss, got shape ",
          loss.defined() ? loss.sizes() : c10::IntArrayRef{});
  require(loss.requires_grad(),
          "the loss does not require grad: it was computed without autograd history "
          "(e.g. by a forward without gradients, ACC_FORWARD_NO_GRAD, or from a model whose "
          "only trainable parameters are LoRA adapters it had disabled)");
}

}  // namespace acc

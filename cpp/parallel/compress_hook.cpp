#include "parallel/compress_hook.h"

namespace acc {

std::optional<at::ScalarType> wire_dtype(const std::string& name) {
  if (name == "fp16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  return std::nullopt;
}

CompressHook::CompressHook(c10::intrusive_ptr<c10d::ProcessGroup> group, at::ScalarType wire_dtype)
    : group_(std::move(group)), wire_dtype_(wire_dtype) {}

c10::intrusive_ptr<c10::ivalue::Future> CompressHook::runHook(c10d::GradBucket& bucket) {
  // Cast, then divide in the 16-bit dtype, as PyTorch's compression hooks do (1.13 and 2.x alike).
  at::Tensor compressed = bucket.getBuffer().to(wire_dtype_).div_(group_->getSize());
  std::vector<at::Tensor> tensors{compressed};
  auto reduced = group_->allreduce(tensors)->getFuture();
  at::Tensor destination = bucket.getBufferRef();
  return reduced->then(
      [destination](c10::ivalue::Future& future) {
        destination.copy_(future.value().toTensorVector()[0]);
        return c10::IValue(destination);
      },
      reduced->elementType());
}

at::Tensor CompressHook::parseHookResult(const c10::IValue& result) {
  return result.isTensor() ? result.toTensor() : result.toTensorVector()[0];
}

}  // namespace acc

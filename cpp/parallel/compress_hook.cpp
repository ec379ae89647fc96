#include "parallel/compress_hook.h"

namespace acc {

CompressHook::CompressHook(c10::intrusive_ptr<c10d::ProcessGroup> group, at::ScalarType wire_dtype)
    : group_(std::move(group)), wire_dtype_(wire_dtype) {}

c10::intrusive_ptr<c10::ivalue::Future> CompressHook::runHook(c10d::GradBucket& bucket) {
  // Divide before the cast so the sum stays in range, as PyTorch's compression hooks do.
  at::Tensor compressed = bucket.getBuffer().div(group_->getSize()).to(wire_dtype_);
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

// A DDP communication hook that allreduces gradient buckets in a reduced precision (bf16 here; the
// Reducer's built-in hook covers fp16): half the bytes on the wire, gradients back in fp32.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <optional>
#include <string>

namespace acc {

// The dtype a 16-bit comm hook or wrapper sends ("fp16", "bf16"); none for "no" (or any other name).
std::optional<at::ScalarType> wire_dtype(const std::string& name);

class CompressHook final : public c10d::CommHookInterface {
 public:
  CompressHook(c10::intrusive_ptr<c10d::ProcessGroup> group, at::ScalarType wire_dtype);
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  at::ScalarType wire_dtype_;
};

}  // namespace acc

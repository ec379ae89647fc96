#include "common/gloo_bfloat16.h"

#if ACC_TORCH_VERSION < 202
#include <ATen/core/ivalue.h>

#include <algorithm>

namespace acc::compat {
namespace {

using WorkPtr = GlooWithBfloat16::WorkPtr;
using TensorLists = std::vector<std::vector<at::Tensor>>;

bool is_bf16(const at::Tensor& t) { return t.defined() && t.scalar_type() == at::kBFloat16; }
bool any_bf16(const std::vector<at::Tensor>& ts) { return std::any_of(ts.begin(), ts.end(), is_bf16); }
bool any_bf16(const TensorLists& lists) {
  return std::any_of(lists.begin(), lists.end(), [](const auto& ts) { return any_bf16(ts); });
}

// The same memory seen as float16, a 2-byte type Gloo moves (it has no int16): bytes are copied as
// they are, and what the collective moves lands in the bf16 tensor itself.
at::Tensor bits(const at::Tensor& t) { return is_bf16(t) ? t.view(at::kHalf) : t; }
std::vector<at::Tensor> bits(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(bits(t));
  return out;
}
TensorLists bits(const TensorLists& lists) {
  TensorLists out;
  for (const auto& ts : lists) out.push_back(bits(ts));
  return out;
}

// A reduction of float32 copies of bf16 tensors: the sums are rounded back into the tensors when
// the work completes, before wait() returns and before its future (which DDP's Reducer chains
// on) completes with the original tensors.
class RoundedBackWork : public c10d::Work {
 public:
  RoundedBackWork(WorkPtr inner, std::vector<at::Tensor> wide, std::vector<at::Tensor> targets)
      : inner_(std::move(inner)), targets_(std::move(targets)) {
    done_ = inner_->getFuture()->then(
        [wide = std::move(wide), targets = targets_](c10::ivalue::Future& reduced) {
          // then() runs this on failure too: value() rethrows the reduction's error into the future
          // returned (a peer gone, a timeout), which DDP's Reducer and wait() then report.
          (void)reduced.value();
          round_back(wide, targets);
          return c10::IValue(targets);
        },
        c10::ListType::ofTensors());
  }
  bool isCompleted() override { return done_->completed(); }
  bool isSuccess() const override { return inner_->isSuccess() && !done_->hasError(); }
  std::exception_ptr exception() const override {
    return inner_->exception() ? inner_->exception() : (done_->hasError() ? done_->exception_ptr() : nullptr);
  }
  std::vector<at::Tensor> result() override { return targets_; }
  void synchronize() override { inner_->synchronize(); }
  bool wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);  // throws a failure or a timeout as Gloo's own work does
    done_->wait();
    if (done_->hasError()) std::rethrow_exception(done_->exception_ptr());
    return true;
  }
  void abort() override { inner_->abort(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return done_; }

 private:
  static void round_back(const std::vector<at::Tensor>& wide, const std::vector<at::Tensor>& targets) {
    for (size_t i = 0; i < targets.size(); ++i)
      if (is_bf16(targets[i])) targets[i].copy_(wide[i]);
  }

  WorkPtr inner_;
  std::vector<at::Tensor> targets_;
  c10::intrusive_ptr<c10::ivalue::Future> done_;
};

std::vector<at::Tensor> widened(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(is_bf16(t) ? t.to(at::kFloat) : t);
  return out;
}

// A reduction `call` over `tensors`, through float32 copies where any is bf16.
template <typename Call>
WorkPtr reducing(std::vector<at::Tensor>& tensors, Call call) {
  if (!any_bf16(tensors)) return call(tensors);
  auto wide = widened(tensors);
  return c10::make_intrusive<RoundedBackWork>(call(wide), wide, tensors);
}

// A data movement `call` from `inputs` to `outputs`, bf16 tensors moved as their bits.
template <typename Outputs, typename Inputs, typename Call>
WorkPtr moving(Outputs& outputs, Inputs& inputs, Call call) {
  if (!any_bf16(outputs) && !any_bf16(inputs)) return call(outputs, inputs);
  auto out = bits(outputs);
  auto in = bits(inputs);
  return call(out, in);
}

}  // namespace

WorkPtr GlooWithBfloat16::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  if (!any_bf16(tensors)) return ProcessGroupGloo::broadcast(tensors, opts);
  auto moved = bits(tensors);
  return ProcessGroupGloo::broadcast(moved, opts);
}

WorkPtr GlooWithBfloat16::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return reducing(tensors, [&](auto& ts) { return ProcessGroupGloo::allreduce(ts, opts); });
}

WorkPtr GlooWithBfloat16::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  return reducing(tensors, [&](auto& ts) { return ProcessGroupGloo::allreduce_coalesced(ts, opts); });
}

WorkPtr GlooWithBfloat16::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  return reducing(tensors, [&](auto& ts) { return ProcessGroupGloo::reduce(ts, opts); });
}

WorkPtr GlooWithBfloat16::allgather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  return moving(outputs, inputs, [&](auto& out, auto& in) { return ProcessGroupGloo::allgather(out, in, opts); });
}

WorkPtr GlooWithBfloat16::allgather_coalesced(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                                              const c10d::AllgatherOptions& opts) {
  return moving(outputs, inputs,
                [&](auto& out, auto& in) { return ProcessGroupGloo::allgather_coalesced(out, in, opts); });
}

WorkPtr GlooWithBfloat16::gather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  return moving(outputs, inputs, [&](auto& out, auto& in) { return ProcessGroupGloo::gather(out, in, opts); });
}

WorkPtr GlooWithBfloat16::scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                                  const c10d::ScatterOptions& opts) {
  return moving(outputs, inputs, [&](auto& out, auto& in) { return ProcessGroupGloo::scatter(out, in, opts); });
}

WorkPtr GlooWithBfloat16::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  auto moved = bits(tensors);
  return ProcessGroupGloo::send(moved, dst_rank, tag);
}

WorkPtr GlooWithBfloat16::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  auto moved = bits(tensors);
  return ProcessGroupGloo::recv(moved, src_rank, tag);
}

}  // namespace acc::compat
#endif

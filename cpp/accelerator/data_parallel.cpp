#include "accelerator/data_parallel.h"

#include <algorithm>
#include <map>

#include "accelerator/compress_hook.h"
#include "common/error.h"

namespace acc {
namespace {

constexpr int64_t kFirstBucketBytes = 1024 * 1024;  // PyTorch DDP's first, small bucket

}  // namespace

DataParallel::DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist,
                           DataParallelOptions options)
    : dist_(std::move(dist)), options_(options) {
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  std::vector<at::Tensor> everything;
  for (const auto& entry : model->named_parameters()) {
    everything.push_back(entry.second);
    if (!entry.second.requires_grad()) continue;
    names[params.size()] = entry.first;
    params.push_back(entry.second);
  }
  // Buffers keep their identity (Model::to and load_state_dict work in place): found once, not per forward.
  for (const auto& entry : model->named_buffers()) buffers_.push_back(entry.second);
  everything.insert(everything.end(), buffers_.begin(), buffers_.end());
  broadcast(everything, "prepare_model (initial parameters)");
  if (params.empty()) return;
  if (options_.comm_hook == "bf16" && !dist_->device().is_cuda())
    fail(Status::Unsupported, "the bf16 DDP comm hook needs NCCL: Gloo cannot allreduce bf16 (use \"fp16\" on CPU)");

  const int64_t cap = options_.bucket_cap_mb * 1024 * 1024;
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> limits;
  std::tie(buckets, limits) = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(cap)}, std::vector<bool>(params.size(), false));
  // Gradients are ready in reverse order of the forward: the last parameters' bucket goes first.
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
  try {
    reducer_ = std::make_unique<c10d::Reducer>(params, buckets, limits, dist_->group(),
                                               std::vector<bool>(params.size(), false), cap,
                                               options_.find_unused_parameters, /*gradient_as_bucket_view=*/false,
                                               names, kFirstBucketBytes);
  } catch (...) {
    rethrow_collective_error("prepare_model (reducer)");
  }
  if (options_.comm_hook == "fp16")
    reducer_->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
  else if (options_.comm_hook == "bf16")
    reducer_->register_comm_hook(std::make_unique<CompressHook>(dist_->group(), at::kBFloat16));
  else
    require(options_.comm_hook == "no", "unknown DDP comm hook '", options_.comm_hook, "' (no, fp16, bf16)");
}

void DataParallel::broadcast(const std::vector<at::Tensor>& tensors, const std::string& name) {
  // One collective per dtype, not per tensor: buffers are broadcast before every training forward.
  at::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors)
    if (t.numel() > 0) by_dtype[t.scalar_type()].push_back(t.detach());
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (const auto& t : group) flat.push_back(t.reshape({-1}).to(dist_->device()));
    std::vector<at::Tensor> list{at::cat(flat)};
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    wait_collective(dist_->group()->broadcast(list, options), name);
    if (dist_->rank() == 0) continue;
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(list[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

void DataParallel::before_forward() {
  if (options_.broadcast_buffers && !buffers_.empty()) broadcast(buffers_, "forward (buffers)");
  if (reducer_) reducer_->prepare_for_forward();
}

void DataParallel::after_forward(const NamedTensors& outputs, bool sync) {
  if (!reducer_ || !sync) return;
  std::vector<at::Tensor> tensors;
  if (options_.find_unused_parameters)
    for (const auto& entry : outputs) tensors.push_back(entry.second);
  try {
    reducer_->prepare_for_backward(tensors);
  } catch (const c10::Error& e) {
    fail(Status::NotInitialized, "data-parallel forward: ", e.what_without_backtrace());
  }
}

void DataParallel::sync_next_backward() {
  if (!reducer_) return;
  try {
    reducer_->prepare_for_backward({});
  } catch (const c10::Error& e) {
    fail(Status::NotInitialized, "trigger_sync_in_backward: ", e.what_without_backtrace());
  }
}

}  // namespace acc

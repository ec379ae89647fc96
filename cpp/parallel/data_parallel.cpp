#include "parallel/data_parallel.h"

#include <algorithm>
#include <utility>

#include "parallel/broadcast.h"
#include "parallel/compress_hook.h"
#include "common/compat.h"
#include "common/error.h"

namespace acc {
namespace {

constexpr int64_t kFirstBucketBytes = 1024 * 1024;  // PyTorch DDP's first, small bucket
const char* const kAnnouncement = "join_uneven_inputs (processes still training)";

}  // namespace

std::pair<std::vector<std::vector<size_t>>, std::vector<size_t>> ddp_buckets(const std::vector<at::Tensor>& params,
                                                                             int64_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> limits;
  std::tie(buckets, limits) = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(cap_bytes)},
      std::vector<bool>(params.size(), false));
  // Gradients are ready in reverse order of the forward: the last parameters' bucket goes first.
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
  return {std::move(buckets), std::move(limits)};
}

DataParallel::DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist,
                           DataParallelOptions options)
    : dist_(std::move(dist)), options_(options) {
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& entry : model->named_parameters()) {
    state_.push_back(entry.second);
    if (!entry.second.requires_grad()) continue;
    names[params.size()] = entry.first;
    params.push_back(entry.second);
  }
  // Buffers keep their identity (Model::to and load_state_dict work in place): found once, not per forward.
  std::vector<at::Tensor> buffers;
  for (const auto& entry : model->named_buffers()) buffers.push_back(entry.second);
  state_.insert(state_.end(), buffers.begin(), buffers.end());
  buffer_sync_ = std::make_unique<BufferSync>(dist_, std::move(buffers), options_.broadcast_buffers);
  broadcast(state_, "prepare_model (initial parameters)");
  if (params.empty()) return;
  bucket_device_ = params.front().device();
  if (options_.comm_hook == "bf16" && dist_->backend() != Backend::Nccl)
    fail(Status::Unsupported, "the bf16 DDP comm hook needs NCCL: Gloo cannot allreduce bf16 (use \"fp16\" on CPU)");

  const int64_t cap = options_.bucket_cap_mb * 1024 * 1024;
  auto [buckets, limits] = ddp_buckets(params, cap);
  for (const auto& bucket : buckets) {
    int64_t elements = 0;
    for (size_t i : bucket) elements += params[i].numel();
    // The compression hooks allreduce a 16-bit copy of the bucket.
    const at::ScalarType wire = options_.comm_hook == "fp16"   ? at::kHalf
                                : options_.comm_hook == "bf16" ? at::kBFloat16
                                                               : params[bucket.front()].scalar_type();
    buckets_.emplace_back(elements, wire);
  }
  compat::ReducerSettings settings;
  settings.params = std::move(params);
  settings.buckets = std::move(buckets);
  settings.bucket_limits = std::move(limits);
  settings.bucket_cap_bytes = cap;
  settings.first_bucket_cap_bytes = kFirstBucketBytes;
  settings.find_unused_parameters = options_.find_unused_parameters;
  settings.names = std::move(names);
  try {
    reducer_ = compat::make_reducer(std::move(settings), dist_->group());
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

void DataParallel::broadcast(const std::vector<at::Tensor>& tensors, const std::string& name, int64_t source) {
  broadcast_in_place(*dist_, tensors, name, source);
}

void DataParallel::before_forward(bool sync) {
  if (joining_) announce(sync);
  buffer_sync_->before_forward();
  if (reducer_) reducer_->prepare_for_forward();
}

void DataParallel::announce(bool sync) {
  finish_announcement();
  // Processes still training do not need the sums: the allreduce runs on while they compute (the
  // group keeps collectives in order), and only the next announcement waits for it.
  announcement_ = at::tensor({int64_t{1}, int64_t{sync ? 1 : 0}}, at::kLong).to(dist_->device());
  std::vector<at::Tensor> list{announcement_};
  announcement_work_ = dist_->group()->allreduce(list);
}

void DataParallel::finish_announcement() {
  if (announcement_work_) wait_collective(std::exchange(announcement_work_, {}), kAnnouncement);
}

at::Tensor DataParallel::allreduce(std::vector<int64_t> values, c10d::ReduceOp op, const std::string& name) {
  std::vector<at::Tensor> list{at::tensor(values, at::kLong).to(dist_->device())};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  wait_collective(dist_->group()->allreduce(list, options), name);
  return list[0].cpu();
}

void DataParallel::join_begin() {
  require(!joining_, "join_uneven_inputs has begun already for this model");
  if (options_.find_unused_parameters)
    fail(Status::Unsupported,
         "join_uneven_inputs does not support ddp_find_unused_parameters (its extra allreduce is not joined)");
  joining_ = true;
}

void DataParallel::join_end() {
  require(joining_, "join_uneven_inputs_end without join_uneven_inputs_begin");
  joining_ = false;
  finish_announcement();
  // Until every process is here: one round per training forward the others still run, answering
  // their announcement with zeros and following their buffer broadcast (when due: the others'
  // previous forward ran in step with this process's last one, then with the previous round) and
  // gradient allreduces.
  bool last_to_finish = true;
  for (;;) {
    const at::Tensor sums = allreduce({0, 0}, c10d::ReduceOp::SUM, kAnnouncement);
    if (sums[0].item<int64_t>() == 0) break;
    last_to_finish = false;
    const bool averaged = sums[1].item<int64_t>() > 0;
    buffer_sync_->before_forward();
    buffer_sync_->forward_done(averaged);
    if (averaged) shadow_gradient_allreduces();
  }
  // Replicas that finished early missed steps: all take the state of the highest rank among those
  // that finished last (they ran every step).
  const at::Tensor authority =
      allreduce({last_to_finish ? dist_->rank() : -1}, c10d::ReduceOp::MAX, "join_uneven_inputs (final model)");
  broadcast(state_, "join_uneven_inputs (final model)", authority.item<int64_t>());
}

void DataParallel::shadow_gradient_allreduces() {
  // The Reducer launches its buckets' allreduces in bucket order, one each (comm hooks included), on
  // the parameters' device: the shadows must match them (Gloo runs other algorithms on CUDA tensors).
  for (const auto& [elements, dtype] : buckets_) {
    std::vector<at::Tensor> zeros{at::zeros({elements}, at::TensorOptions().dtype(dtype).device(bucket_device_))};
    wait_collective(dist_->group()->allreduce(zeros), "join_uneven_inputs (gradients)");
  }
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
  if (joining_)
    fail(Status::Unsupported, "trigger_sync_in_backward is not supported inside join_uneven_inputs (processes ",
         "that have finished could not know that the backward averages gradients)");
  try {
    reducer_->prepare_for_backward({});
  } catch (const c10::Error& e) {
    fail(Status::NotInitialized, "trigger_sync_in_backward: ", e.what_without_backtrace());
  }
}

}  // namespace acc

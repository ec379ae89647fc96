#include "parallel/data_parallel.h"

#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

#include "parallel/broadcast.h"
#include "parallel/compress_hook.h"
#include "parallel/ddp_sink.h"
#include "parallel/power_sgd.h"
#include "parallel/replica_check.h"
#include "common/compat.h"
#include "common/error.h"

namespace acc {
namespace {

constexpr int64_t kFirstBucketBytes = 1024 * 1024;  // PyTorch DDP's first, small bucket
constexpr int64_t kDefaultBucketCapMb = 25;          // DDP's and Accelerate's default bucket_cap_mb
const char* const kAnnouncement = "join_uneven_inputs (processes still training)";

// Whether this libtorch multiplies float16 matrices on the CPU (the fp16 wrapper's PowerSGD does):
// libtorch 1.x has no such product there; 2.x adds it.
bool cpu_multiplies_half() {
  const at::Tensor one = at::ones({1, 1}, at::TensorOptions().dtype(at::kHalf));
  try {
    (void)at::mm(one, one);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

std::pair<BucketLayout, std::vector<size_t>> reversed_buckets(const std::vector<at::Tensor>& params,
                                                              const std::vector<size_t>& limits) {
  BucketLayout buckets;
  std::vector<size_t> bucket_limits;
  std::tie(buckets, bucket_limits) =
      c10d::compute_bucket_assignment_by_size(params, limits, std::vector<bool>(params.size(), false));
  // Gradients are ready in reverse order of the forward: the last parameters' bucket goes first.
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(bucket_limits.begin(), bucket_limits.end());
  return {std::move(buckets), std::move(bucket_limits)};
}

std::pair<BucketLayout, std::vector<size_t>> ddp_buckets(const std::vector<at::Tensor>& params, int64_t cap_bytes) {
  return reversed_buckets(params, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(cap_bytes)});
}

DataParallel::DataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist,
                           DataParallelOptions options)
    : dist_(std::move(dist)), options_(options) {
  for (const auto& entry : model->named_parameters()) {
    state_.push_back(entry.second);
    if (!entry.second.requires_grad()) continue;
    names_[params_.size()] = entry.first;
    params_.push_back(entry.second);
  }
  // Buffers keep their identity (Model::to and load_state_dict work in place): found once, not per forward.
  std::vector<at::Tensor> buffers;
  for (const auto& entry : model->named_buffers()) buffers.push_back(entry.second);
  state_.insert(state_.end(), buffers.begin(), buffers.end());
  buffer_sync_ = std::make_unique<BufferSync>(dist_, std::move(buffers), options_.broadcast_buffers);
  check_same_model_everywhere(*model, dist_, "prepare_model");
  broadcast(state_, "prepare_model (initial parameters)");
  // PEFT's originals of the modules to save are parameters of its model, which DDP broadcasts too.
  std::vector<at::Tensor> originals;
  for (const auto& entry : model->kept_original_modules()) originals.push_back(entry.second);
  if (!originals.empty()) broadcast(originals, "prepare_model (the modules to save as they were)");
  if (params_.empty()) return;
  if ((options_.comm_hook == "bf16" || options_.comm_wrapper == "bf16") && !group_reduces_bf16())
    fail(Status::Unsupported, "the bf16 DDP comm ", options_.comm_hook == "bf16" ? "hook" : "wrapper",
         " needs a backend that allreduces bf16: this libtorch's Gloo does not (use NCCL, or \"fp16\")");
  if (options_.uses_power_sgd() && options_.comm_wrapper == "fp16" && params_.front().device().is_cpu() &&
      !cpu_multiplies_half())
    fail(Status::Unsupported, "ddp_comm_wrapper fp16 runs PowerSGD's matrix products in float16, which this ",
         "libtorch's CPU has none of (PyTorch's fp16_compress_wrapper fails there at its first compressed step): use ",
         "a GPU, or PowerSGD without the wrapper");
  require(options_.comm_hook == "no" || options_.comm_hook == "fp16" || options_.comm_hook == "bf16" ||
              options_.uses_power_sgd(),
          "unknown DDP comm hook '", options_.comm_hook, "' (no, fp16, bf16, power_sgd, batched_power_sgd)");
  if (options_.uses_power_sgd()) power_sgd_ = std::make_shared<PowerSgdState>(options_.power_sgd, params_.front().device(), options_.comm_hook,
                                                 options_.comm_wrapper);
  std::vector<size_t> limits;
  BucketLayout layout = initial_layout(&limits);
  make_reducer(std::move(layout), std::move(limits));
}

bool DataParallel::group_reduces_bf16() {
  if (dist_->backend() != Backend::Gloo) return true;
  // Gloo gained bf16 in PyTorch 2.2 (before it, the library's group reduces bf16 in float32), and some
  // builds lack it: asked of the group itself (every process asks here, so the probe is a collective
  // like the others of prepare_model).
  std::vector<at::Tensor> probe{at::zeros({1}, at::TensorOptions().dtype(at::kBFloat16).device(dist_->device()))};
  try {
    dist_->group()->allreduce(probe)->wait();
    return true;
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("Invalid scalar type") != std::string::npos) return false;
    rethrow_collective_error("prepare_model (bf16 allreduce probe)");
  }
}

int64_t DataParallel::cap_bytes() const { return options_.bucket_cap_mb * 1024 * 1024; }

int64_t DataParallel::first_bucket_bytes() const {
  // Accelerate passes bucket_cap_mb on to DDP only when it is not 25 (DDP's default), and DDP then
  // gives up its small first bucket.
  return options_.bucket_cap_mb == kDefaultBucketCapMb ? kFirstBucketBytes : cap_bytes();
}

BucketLayout DataParallel::initial_layout(std::vector<size_t>* limits) const {
  std::vector<size_t> size_limits;
  // One bucket until the first averaging step, then rebuilt in its gradients' order.
  if (!options_.find_unused_parameters || options_.static_graph) size_limits = {std::numeric_limits<size_t>::max()};
  else size_limits = {static_cast<size_t>(first_bucket_bytes()), static_cast<size_t>(cap_bytes())};
  auto [layout, bucket_limits] = reversed_buckets(params_, size_limits);
  *limits = std::move(bucket_limits);
  return std::move(layout);
}

void DataParallel::make_reducer(BucketLayout layout, std::vector<size_t> limits) {
  logger_.reset();   // (which holds it)
  reducer_.reset();  // its autograd hooks go with it
  compat::ReducerSettings settings;
  settings.params = params_;
  settings.buckets = layout;
  settings.bucket_limits = std::move(limits);
  settings.bucket_cap_bytes = cap_bytes();
  settings.first_bucket_cap_bytes = first_bucket_bytes();
  settings.find_unused_parameters = options_.find_unused_parameters;
  settings.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  settings.names = names_;
  try {
    reducer_ = compat::make_reducer(std::move(settings), dist_->group());
  } catch (...) {
    rethrow_collective_error("prepare_model (reducer)");
  }
  logger_ = std::make_shared<c10d::Logger>(reducer_);
  reducer_->set_logger(logger_);
  if (options_.static_graph) {
    reducer_->set_static_graph();
    delayed_allreduce_ = std::make_shared<DelayedAllreduce>();
    delayed_allreduce_->reducer = reducer_;
  }
  if (options_.comm_hook == "fp16")
    reducer_->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
  else if (options_.comm_hook == "bf16")
    reducer_->register_comm_hook(std::make_unique<CompressHook>(dist_->group(), at::kBFloat16));
  else if (power_sgd_)
    reducer_->register_comm_hook(std::make_unique<PowerSgdHook>(dist_->group(), power_sgd_));
  layout_ = std::move(layout);
}

void DataParallel::rebuild_buckets_when_due(const char* during) {
  if (!reducer_) return;
  // At every forward with gradients, as PyTorch's DDP calls it: it first checks that the previous
  // averaging backward reduced every bucket, which fails where a trainable parameter got no gradient
  // (without it those buckets' allreduces never run, and each process steps its own gradients).
  auto rebuild_failed = [during] {
    rethrow_collective_error(std::string(during) +
                             " (DDP's gradient buckets, rebuilt in the order of the first backward)");
  };
  try {
    if (!reducer_->rebuild_buckets()) return;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("Expected to have finished reduction") != std::string::npos)
      fail(Status::InvalidArgument, "data-parallel ", during, ": the previous averaging backward gave no gradient to ",
           "some trainable parameters, so DDP could not average them: freeze what a forward does not use, or set ",
           "ddp_find_unused_parameters (", what, ")");
    rebuild_failed();
  } catch (...) {
    rebuild_failed();
  }
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index.emplace(params_[i].unsafeGetTensorImpl(), i);
  BucketLayout layout;
  for (const auto& bucket : reducer_->get_grad_buckets(/*return_zero_tensors=*/false)) {
    layout.emplace_back();
    for (const auto& param : bucket.getParameters()) layout.back().push_back(index.at(param.unsafeGetTensorImpl()));
  }
  layout_ = std::move(layout);
  rebuilt_ = true;
}

std::optional<BucketLayout> DataParallel::saved_layout() const {
  if (!rebuilt_) return std::nullopt;
  return layout_;
}

void DataParallel::check_layout(const BucketLayout& layout, const std::string& where) const {
  std::vector<bool> seen(params_.size(), false);
  for (size_t b = 0; b < layout.size(); ++b) {
    if (layout[b].empty()) fail(Status::Io, where, ": DDP bucket ", b, " is empty");
    for (size_t i : layout[b]) {
      if (i >= params_.size())
        fail(Status::Io, where, ": DDP bucket ", b, " names parameter ", i, ", the model has ", params_.size(),
             " trainable ones");
      if (seen[i]) fail(Status::Io, where, ": parameter ", i, " is in more than one DDP bucket");
      seen[i] = true;
      const auto& first = params_[layout[b].front()];
      if (params_[i].scalar_type() != first.scalar_type() || params_[i].device() != first.device())
        fail(Status::Io, where, ": DDP bucket ", b, " mixes dtypes or devices (", names_.at(i), ")");
    }
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) fail(Status::Io, where, ": no DDP bucket holds parameter ", i, " (", names_.at(i), ")");
}

void DataParallel::restore_layout(const std::optional<BucketLayout>& layout) {
  if (!reducer_) return;
  if (!layout) {
    if (!rebuilt_) return;
    std::vector<size_t> limits;
    BucketLayout first = initial_layout(&limits);
    make_reducer(std::move(first), std::move(limits));
    rebuilt_ = false;
    return;
  }
  check_layout(*layout, "the DDP bucket layout");
  if (rebuilt_ && *layout == layout_) return;
  // The limits only label the buckets in the Reducer's logs.
  make_reducer(*layout, std::vector<size_t>(layout->size(), static_cast<size_t>(cap_bytes())));
  rebuilt_ = true;
}

void DataParallel::broadcast(const std::vector<at::Tensor>& tensors, const std::string& name, int64_t source) {
  broadcast_in_place(*dist_, tensors, name, source);
}

void DataParallel::before_forward(bool sync) {
  // Before any collective, alike on every process (all are at the same step).
  if (!sync && compat::kStaticGraphCountsLocalBackwards && static_graph_first_step_pending())
    fail(Status::Unsupported, "ddp_static_graph on libtorch ", TORCH_VERSION, ": the first training step must average ",
         "gradients (no accumulation micro-step or no_sync before it): this Reducer would count the micro-steps' ",
         "gradients as the first step's and stop averaging (PyTorch's DDP fails there too)");
  if (joining_) announce(sync);
  // PyTorch's DDP: the join announcement, the rebuild, then the buffers.
  rebuild_buckets_when_due("forward");
  buffer_sync_->before_forward();
  // The Reducer counts averaging iterations only (static_graph's first one is the first of them).
  if (reducer_ && sync) reducer_->prepare_for_forward();
}

void DataParallel::before_local_forward() {
  // DDP rebuilds at any forward with gradients on, evaluation mode included.
  if (at::GradMode::is_enabled()) rebuild_buckets_when_due("forward");
  buffer_sync_->before_forward();
}

void DataParallel::announce(bool sync) {
  finish_announcement();
  // The allreduce runs on while the forward computes (the group keeps collectives in order); its
  // sums are checked after the forward (check_announced_sync).
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
  if (power_sgd_)
    fail(Status::Unsupported, "join_uneven_inputs does not support the ", options_.comm_hook,
         " comm hook (a finished process would have to run PowerSGD on zeros, its error feedback included)");
  joining_ = true;
}

void DataParallel::join_end() {
  require(joining_, "join_uneven_inputs_end without join_uneven_inputs_begin");
  // The static graph's first averaging step also allreduces which parameters were used, which a
  // finished process does not shadow: it must have taken part in that step itself.
  if (static_graph_first_step_pending())
    fail(Status::Unsupported, "join_uneven_inputs with ddp_static_graph: this process ran out of data before the ",
         "first averaging step, which every process must take");
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
    rebuild_buckets_when_due("join_uneven_inputs");
    buffer_sync_->before_forward();
    check_announced_sync(sums);  // where the others check it: after their forward's collectives
    buffer_sync_->forward_done(averaged);
    if (!averaged) continue;
    shadow_gradient_allreduces();
    // As DDP's join hook: a process that joins before its first averaging backward still takes
    // part in the others' rebuild, with the model's order.
    if (reducer_) reducer_->push_rebuilt_params_for_all_indices();
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
  for (const auto& bucket : layout_) {
    int64_t elements = 0;
    for (size_t i : bucket) elements += params_[i].numel();
    // The compression hooks allreduce a 16-bit copy of the bucket.
    const at::ScalarType wire = wire_dtype(options_.comm_hook).value_or(params_[bucket.front()].scalar_type());
    std::vector<at::Tensor> zeros{
        at::zeros({elements}, at::TensorOptions().dtype(wire).device(params_[bucket.front()].device()))};
    wait_collective(dist_->group()->allreduce(zeros), "join_uneven_inputs (gradients)");
  }
}

void DataParallel::check_announced_sync(const at::Tensor& sums) {
  const int64_t training = sums[0].item<int64_t>(), averaging = sums[1].item<int64_t>();
  if (averaging == 0 || averaging == training) return;
  fail(Status::Unsupported, "join_uneven_inputs: at this training step ", averaging, " of the ", training,
       " processes still training average gradients and the others accumulate them (no_sync): their gradient ",
       "allreduces cannot be matched. Accumulation windows end at different steps when loaders end at different ",
       "steps (even_batches off): keep even_batches on, or do not accumulate inside join_uneven_inputs");
}

void DataParallel::after_forward(NamedTensors& outputs, bool sync) {
  if (joining_) {
    // Before the backward launches any allreduce: every process still training and every joined one
    // learns the same sums here, so a disagreement fails on all of them alike.
    finish_announcement();
    check_announced_sync(announcement_.cpu());
  }
  if (!reducer_) return;
  const bool finds_unused = options_.find_unused_parameters && !options_.static_graph;
  if (sync) {
    std::vector<at::Tensor> tensors;
    if (finds_unused)
      for (const auto& entry : outputs) tensors.push_back(entry.second);
    try {
      reducer_->prepare_for_backward(tensors);
    } catch (const c10::Error& e) {
      fail(Status::NotInitialized, "data-parallel forward: ", e.what_without_backtrace());
    }
  }
  if (finds_unused) {
    outputs = through_ddp_sink(outputs, {});
  } else if (sync && static_graph_first_step_pending()) {
    // Queued once, by the first averaging backward that reaches the sink (PyTorch 2.x's rule; 1.13
    // sinks the first averaging forward only, the same step unless its outputs were never used).
    outputs = through_ddp_sink(outputs, [weak = std::weak_ptr<DelayedAllreduce>(delayed_allreduce_)] {
      const auto delayed = weak.lock();
      if (!delayed || delayed->queued) return;
      delayed->queued = true;
      torch::autograd::Engine::get_default_engine().queue_callback([weak] {
        const auto delayed = weak.lock();
        if (!delayed) return;
        if (const auto reducer = delayed->reducer.lock()) reducer->delay_all_reduce();
      });
    });
  }
}

void DataParallel::sync_next_backward() {
  if (!reducer_) return;
  if (joining_)
    fail(Status::Unsupported, "trigger_sync_in_backward is not supported inside join_uneven_inputs (processes ",
         "that have finished could not know that the backward averages gradients)");
  if (static_graph_first_step_pending())
    fail(Status::Unsupported, "trigger_sync_in_backward with ddp_static_graph: the first averaging step must come ",
         "from a forward outside no_sync (the static graph's delayed allreduce is queued in that forward's backward)");
  try {
    // An averaging iteration for the Reducer, as the forward would have counted it outside no_sync.
    if (delayed_allreduce_) reducer_->prepare_for_forward();
    reducer_->prepare_for_backward({});
  } catch (const c10::Error& e) {
    fail(Status::NotInitialized, "trigger_sync_in_backward: ", e.what_without_backtrace());
  }
}

}  // namespace acc

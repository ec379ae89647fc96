// ShardedDataParallel's gradient reduction during backward (stages 2 and 3): each unit's gradients
// are reduced as soon as all of them are ready, last unit first on every process, with at most
// kReductionsInFlight units under way; each process keeps its slice of the sum.
#include <torch/csrc/autograd/engine.h>

#include "common/error.h"
#include "parallel/sharded_data_parallel.h"

namespace acc {
namespace {

const char* const kReduce = "backward (sharded gradient reduction)";
constexpr size_t kReductionsInFlight = 2;

}  // namespace

void ShardedDataParallel::on_gradient_ready(size_t param) {
  const size_t units = trainable_.layout->units().size();
  if (!backward_started_) {
    backward_started_ = true;
    ready_count_.assign(units, 0);
    launched_.assign(units, false);
    next_launch_ = static_cast<int64_t>(units) - 1;
    add_to_grads_ = grads_live_;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finish_backward(); });
  }
  const size_t unit = trainable_.layout->unit_of(param);
  if (++ready_count_[unit] < trainable_.layout->units()[unit].params.size()) return;
  if (frozen_release_) frozen_release_->trainable_ready(unit);
  if (!sync_) {  // local accumulation: the full gradients stay
    if (options_.stage == 3) release(trainable_, unit);
    return;
  }
  launched_[unit] = true;  // ready; launched below in order
  // Every process must start the same reductions in the same order: the last unit first.
  while (next_launch_ >= 0 && launched_[next_launch_]) launch_reduction(static_cast<size_t>(next_launch_--));
  finish_reductions(false);
}

void ShardedDataParallel::launch_reduction(size_t unit) {
  at::NoGradGuard no_grad;
  const FlatUnit& u = trainable_.layout->units()[unit];
  const double share = 1.0 / static_cast<double>(dist_->world_size());
  // Bounded memory: a backward that outruns the reductions waits for the oldest before adding one
  // (DDP's Reducer keeps every bucket; here each would be a unit's full gradients).
  while (pending_.size() >= kReductionsInFlight) finish_oldest_reduction();
  Pending pending{unit, {}, {}};
  try {
    if (options_.stage == 3 && dist_->backend() == Backend::Gloo) {
      // Stage 3 on Gloo all-reduces each gradient in place: no bucket, no second copy of the unit.
      for (size_t k = 0; k < u.params.size(); ++k) {
        at::Tensor& p = trainable_.params[u.params[k]];
        at::Tensor grad = p.grad().defined() ? p.grad() : at::zeros(trainable_.shapes[u.params[k]], trainable_.full[unit].options());
        p.mutable_grad().reset();
        grad.mul_(share);  // as DDP's Reducer: each process's share divided in before the sum
        std::vector<at::Tensor> list{grad};
        pending.works.push_back(dist_->group()->allreduce(list));
        pending.tensors.push_back(grad);
      }
    } else {
      at::Tensor bucket = at::zeros({u.padded()}, shard_grads_[unit].options());
      for (size_t k = 0; k < u.params.size(); ++k) {
        at::Tensor& p = trainable_.params[u.params[k]];
        if (p.grad().defined()) bucket.narrow(0, u.offsets[k], p.grad().numel()).copy_(p.grad().reshape({-1}));
        p.mutable_grad().reset();  // the full gradient is not kept
      }
      at::Tensor sum = bucket.narrow(0, 0, u.numel);
      sum.mul_(share);
      if (dist_->backend() == Backend::Nccl) {
        at::Tensor mine = at::empty({u.slice}, bucket.options());
        pending.works.push_back(shard_group_->_reduce_scatter_base(mine, bucket));  // this machine's sum
        pending.tensors.push_back(mine);
      } else {
        std::vector<at::Tensor> list{sum};  // the parameters, without the slices' padding
        pending.works.push_back(dist_->group()->allreduce(list));
        pending.tensors.push_back(bucket);
      }
    }
  } catch (...) {
    rethrow_collective_error(kReduce);
  }
  if (options_.stage == 3) release(trainable_, unit);
  pending_.push_back(std::move(pending));
}

void ShardedDataParallel::finish_oldest_reduction() {
  Pending p = std::move(pending_.front());
  pending_.erase(pending_.begin());
  for (const auto& work : p.works) wait_collective(work, kReduce);
  at::NoGradGuard no_grad;
  const FlatUnit& u = trainable_.layout->units()[p.unit];
  auto take = [&](const at::Tensor& into, const at::Tensor& from) {
    if (add_to_grads_) into.add_(from);
    else into.copy_(from);
  };
  if (p.tensors.size() == u.params.size() && options_.stage == 3 && dist_->backend() == Backend::Gloo) {
    // Per-parameter sums: this process's pieces of them.
    for (const auto& piece : trainable_.layout->pieces()) {
      if (piece.unit != p.unit) continue;
      take(shard_grads_[p.unit].narrow(0, piece.shard_pos - u.shard_offset, piece.length),
           p.tensors[piece.slot].reshape({-1}).narrow(0, piece.begin, piece.length));
    }
    return;
  }
  if (dist_->backend() == Backend::Nccl && peers_) {
    // Hybrid: this machine's sum of the slice, summed over the machines holding the same slice.
    std::vector<at::Tensor> list{p.tensors[0]};
    wait_collective(peers_->allreduce(list), kReduce);
  }
  take(shard_grads_[p.unit], dist_->backend() == Backend::Nccl ? p.tensors[0] : my_slice(p.unit, p.tensors[0]));
}

void ShardedDataParallel::finish_reductions(bool wait_all) {
  auto completed = [](const Pending& p) {
    for (const auto& work : p.works)
      if (!work->isCompleted()) return false;
    return true;
  };
  while (!pending_.empty() && (wait_all || completed(pending_.front()))) finish_oldest_reduction();
}

void ShardedDataParallel::finish_backward() {
  backward_started_ = false;
  if (sync_) {
    // Units whose gradients never all arrived (parameters unused in this forward) count as zeros.
    for (; next_launch_ >= 0; --next_launch_) launch_reduction(static_cast<size_t>(next_launch_));
    finish_reductions(true);
    grads_live_ = true;
  }
  if (options_.stage == 3) release_all();
  if (frozen_release_) frozen_release_->backward_ended();
}

}  // namespace acc

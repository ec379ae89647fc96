#include "parallel/power_sgd.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "common/compat.h"
#include "common/error.h"
#include "common/random.h"
#include "parallel/compress_hook.h"
#include "state/distributed.h"

namespace acc {
namespace {

constexpr uint64_t kSeedBound = 1000000000;  // PowerSGD's rng.randint(1_000_000_000)

// PyTorch's _orthogonalize_gram_schmidt, on a batch of matrices (columns normalised in turn, each
// removed from the columns after it).
void gram_schmidt(const at::Tensor& matrices, double epsilon) {
  const int64_t columns = matrices.size(2);
  for (int64_t i = 0; i < columns; ++i) {
    at::Tensor column = matrices.narrow(2, i, 1);
    const at::Tensor norm = compat::python_dim_norm(column, 1);
    column.div_(epsilon == 0 ? norm : norm + epsilon);
    if (i + 1 < columns) {
      at::Tensor rest = matrices.narrow(2, i + 1, columns - i - 1);
      rest.sub_(at::sum(column * rest, {1}, /*keepdim=*/true) * column);
    }
  }
}

// PyTorch's _orthogonalize: Gram-Schmidt for ranks up to 2 and 16-bit floats, else QR in place.
void orthogonalize(const at::Tensor& matrices, double epsilon) {
  const int64_t rank = matrices.size(2);
  const auto dtype = matrices.scalar_type();
  if (rank <= 2 || dtype == at::kHalf || dtype == at::kBFloat16) return gram_schmidt(matrices, epsilon);
  at::Tensor q = matrices;
  at::Tensor r = at::empty({matrices.size(0), rank, rank}, matrices.options());
  at::linalg_qr_out(q, r, matrices, "reduced");
}

// A kept memory must fit what this bucket needs now (a state loaded from a checkpoint of another
// model or layout would not): refused with the reason, before any arithmetic on it.
void check_memory(const at::Tensor& kept, at::IntArrayRef shape, const at::Tensor& input, const char* what,
                  int64_t bucket) {
  if (kept.sizes() != shape || kept.scalar_type() != input.scalar_type() || kept.device() != input.device())
    fail(Status::InvalidArgument, "PowerSGD's ", what, " of gradient bucket ", bucket, " is ", kept.sizes(), " ",
         kept.scalar_type(), " on ", kept.device(), ", the bucket needs ", shape, " ", input.scalar_type(), " on ",
         input.device(), " (a state saved for another model or bucket layout?)");
}

// Error feedback: what the bucket's last compression lost on this process joins its gradients (a
// zero error the first time); returns a copy of the result, against which the next error is measured.
at::Tensor add_error_feedback(PowerSgdState& st, int64_t index, at::Tensor& input) {
  auto error = st.error.find(index);
  if (error != st.error.end()) {
    check_memory(error->second, input.sizes(), input, "error feedback", index);
    input.add_(error->second);
  } else {
    st.error[index] = at::zeros({input.size(0)}, input.options());
  }
  return input.clone();
}

// rng.randint(1_000_000_000) seeding torch's generator inside fork_rng(devices=[]): a CPU generator of
// that seed (the global one is left as it was), and the GPUs' seeded, which fork_rng does not undo.
at::Generator projection_generator(NumpyRandomState& rng) {
  const auto seed = static_cast<uint64_t>(rng.randint(kSeedBound));
  seed_gpus(seed);
  return seeded_generator(seed);
}

// Standard normal values of `like`'s shape and dtype, drawn on the CPU as PowerSGD draws them.
at::Tensor projection(const at::Tensor& like, at::Generator& generator) {
  return at::randn(like.sizes(), generator, at::TensorOptions().dtype(like.scalar_type()).device(at::kCPU));
}

}  // namespace

PowerSgdHook::PowerSgdHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<PowerSgdState> state)
    : group_(std::move(group)), state_(std::move(state)) {}

c10::intrusive_ptr<c10::ivalue::Future> PowerSgdHook::runHook(c10d::GradBucket& bucket) {
  at::Tensor input = bucket.getBuffer();
  if (const auto wire = wire_dtype(state_->wire)) {  // Accelerate's comm_wrapper: a 16-bit copy
    at::Tensor cast = input.to(*wire);
    bucket.setBuffer(cast);
    input = cast;
  }
  if (state_->iter < state_->settings.start_iter) {
    // Plain averaging (PyTorch's _allreduce_fut: divided first, then summed), left to run on.
    count_iteration(bucket);
    input.div_(group_->getSize());
    std::vector<at::Tensor> tensors{input};
    auto reduced = group_->allreduce(tensors)->getFuture();
    return reduced->then(
        [](c10::ivalue::Future& future) { return c10::IValue(future.value().toTensorVector()[0]); },
        c10::TensorType::get());
  }
  // Compressed: three dependent allreduces per bucket, waited for here (PyTorch chains them as
  // callbacks that wait too), so every process issues its collectives in the same order.
  at::Tensor result =
      state_->hook == "batched_power_sgd" ? reduce_batched(bucket, input) : reduce_layerwise(bucket, input);
  std::vector<c10::Device> devices;
  if (!result.is_cpu()) devices.push_back(result.device());
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get(), devices);
  done->markCompleted(c10::IValue(result));
  return done;
}

at::Tensor PowerSgdHook::parseHookResult(const c10::IValue& result) {
  return result.isTensor() ? result.toTensor() : result.toTensorVector()[0];
}

void PowerSgdHook::allreduce(at::Tensor& tensor, const char* what) {
  std::vector<at::Tensor> tensors{tensor};
  wait_collective(group_->allreduce(tensors), std::string("DDP's PowerSGD allreduce (") + what + ")");
}

void PowerSgdHook::count_iteration(const c10d::GradBucket& bucket) {
  if (bucket.isLast()) ++state_->iter;
}

void PowerSgdHook::finish_compression(const c10d::GradBucket& bucket, int64_t index, const at::Tensor& input_copy,
                                      const at::Tensor& input) {
  PowerSgdState& st = *state_;
  if (st.settings.use_error_feedback) st.error[index] = input_copy - input;
  if (!st.settings.warm_start) {
    st.p_memory.clear();
    st.q_memory.clear();
  }
  count_iteration(bucket);
}

at::Tensor PowerSgdHook::reduce_layerwise(c10d::GradBucket& bucket, at::Tensor input) {
  PowerSgdState& st = *state_;
  const PowerSgdSettings& s = st.settings;
  const int64_t world = group_->getSize();
  const auto index = static_cast<int64_t>(bucket.getIndex());
  const at::Tensor input_copy = s.use_error_feedback ? add_error_feedback(st, index, input) : at::Tensor();

  // Matrices worth compressing, grouped by shape in the order shapes first appear (PyTorch's
  // shape_to_tensors); the rest travels whole.
  struct ShapeGroup {
    std::vector<int64_t> shape;
    std::vector<at::Tensor> matrices;
  };
  std::vector<ShapeGroup> groups;
  std::vector<at::Tensor> uncompressed;
  int64_t p_total = 0, q_total = 0;
  for (const at::Tensor& gradient : bucket.getGradients()) {
    if (gradient.dim() == 0 || gradient.numel() == 0) {  // PyTorch's view(shape[0], -1) fails on these
      uncompressed.push_back(gradient);
      continue;
    }
    at::Tensor matrix = gradient.view({gradient.size(0), -1});
    const int64_t n = matrix.size(0), m = matrix.size(1);
    const int64_t rank = std::min({n, m, s.matrix_approximation_rank});
    if (static_cast<double>((n + m) * rank) * s.min_compression_rate < static_cast<double>(n * m)) {
      const std::vector<int64_t> shape = matrix.sizes().vec();
      auto group = std::find_if(groups.begin(), groups.end(), [&](const ShapeGroup& g) { return g.shape == shape; });
      if (group == groups.end()) group = groups.insert(groups.end(), ShapeGroup{shape, {}});
      group->matrices.push_back(matrix);
      p_total += n * rank;
      q_total += m * rank;
    } else {
      uncompressed.push_back(gradient);
    }
  }
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : uncompressed) flat.push_back(t.view({-1}));
  at::Tensor whole = flat.empty() ? at::empty({0}, input.options()) : at::cat(flat);

  const bool fresh = !s.warm_start || st.p_memory.count(index) == 0;
  if (fresh) {
    st.p_memory[index] = at::empty({p_total}, input.options());
    st.q_memory[index] = at::empty({q_total}, input.options());
  }
  at::Tensor& p_memory = st.p_memory[index];
  at::Tensor& q_memory = st.q_memory[index];
  check_memory(p_memory, {p_total}, input, "P memory", index);
  check_memory(q_memory, {q_total}, input, "Q memory", index);
  // Each matrix (or, with batch_tensors_with_same_shape, each shape's stack of them) with its P and
  // Q, views into the bucket's P and Q memories.
  struct Item {
    at::Tensor matrices, p, q;
    const ShapeGroup* stacked;  // the group copied into `matrices` (null: a view of the gradient)
  };
  std::vector<Item> items;
  int64_t p_at = 0, q_at = 0;
  auto add_item = [&](const at::Tensor& batch, const ShapeGroup* stacked) {
    const int64_t b = batch.size(0), n = batch.size(1), m = batch.size(2);
    const int64_t rank = std::min({n, m, s.matrix_approximation_rank});
    items.push_back({batch, p_memory.narrow(0, p_at, b * n * rank).view({b, n, rank}),
                     q_memory.narrow(0, q_at, b * m * rank).view({b, m, rank}), stacked});
    p_at += b * n * rank;
    q_at += b * m * rank;
  };
  for (const ShapeGroup& group : groups) {
    if (!s.batch_tensors_with_same_shape) {
      for (const at::Tensor& matrix : group.matrices) add_item(matrix.unsqueeze(0), nullptr);
    } else if (group.matrices.size() == 1) {
      add_item(group.matrices[0].unsqueeze(0), nullptr);
    } else {
      add_item(at::stack(group.matrices), &group);
    }
  }

  if (!fresh) {
    for (const Item& item : items) orthogonalize(item.q, s.orthogonalization_epsilon);
  } else {
    at::Generator generator = projection_generator(st.rng);
    for (const Item& item : items) {
      item.q.copy_(projection(item.q, generator));
      orthogonalize(item.q, s.orthogonalization_epsilon);
    }
  }
  for (Item& item : items) at::bmm_out(item.p, item.matrices, item.q);

  allreduce(whole, "uncompressed gradients");
  whole.div_(world);
  int64_t at_element = 0;
  for (at::Tensor& t : uncompressed) {
    t.copy_(whole.narrow(0, at_element, t.numel()).view_as(t));
    at_element += t.numel();
  }
  allreduce(p_memory, "P");
  for (const Item& item : items) orthogonalize(item.p, s.orthogonalization_epsilon);
  for (Item& item : items) at::bmm_out(item.q, item.matrices.transpose(1, 2), item.p);
  allreduce(q_memory, "Q");
  q_memory.div_(world);
  for (Item& item : items) at::bmm_out(item.matrices, item.p, item.q.transpose(1, 2));
  for (const Item& item : items)
    if (item.stacked)
      for (size_t i = 0; i < item.stacked->matrices.size(); ++i)
        item.stacked->matrices[i].copy_(item.matrices[static_cast<int64_t>(i)]);

  finish_compression(bucket, index, input_copy, input);
  return input;
}

at::Tensor PowerSgdHook::reduce_batched(c10d::GradBucket& bucket, at::Tensor input) {
  PowerSgdState& st = *state_;
  const PowerSgdSettings& s = st.settings;
  const int64_t world = group_->getSize();
  const int64_t length = input.size(0);
  const auto side = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(length))));
  // PyTorch takes the rank as given; a rank above the square's side could not be orthogonalised.
  const int64_t rank = std::min(s.matrix_approximation_rank, side);
  const int64_t padded = side * side;
  input.resize_({padded});  // the bucket's storage grows in place, so its gradient views follow
  input.narrow(0, length, padded - length).fill_(0);
  const auto index = static_cast<int64_t>(bucket.getIndex());
  const at::Tensor input_copy = s.use_error_feedback ? add_error_feedback(st, index, input) : at::Tensor();
  at::Tensor matrix = input.view({side, side});
  if (!s.warm_start || st.p_memory.count(index) == 0) {
    st.p_memory[index] = at::empty({side, rank}, input.options());
    at::Generator generator = projection_generator(st.rng);
    st.q_memory[index] = projection(st.p_memory[index], generator).to(input.device());
  }
  at::Tensor& p = st.p_memory[index];
  at::Tensor& q = st.q_memory[index];
  check_memory(p, {side, rank}, input, "P memory", index);
  check_memory(q, {side, rank}, input, "Q memory", index);
  orthogonalize(q.unsqueeze(0), 0);
  at::matmul_out(p, matrix, q);
  allreduce(p, "P");
  orthogonalize(p.unsqueeze(0), 0);
  at::matmul_out(q, matrix.t(), p);
  allreduce(q, "Q");
  q.div_(world);
  at::matmul_out(matrix, p, q.t());
  finish_compression(bucket, index, input_copy, input);
  input.resize_({length});
  return input;
}

}  // namespace acc

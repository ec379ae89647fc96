#include "model/peft/incremental_pca.h"

#include <ATen/core/Generator.h>

#include <mutex>
#include <tuple>

#include "common/error.h"
#include "common/random.h"
#include "model/peft/svd_lowrank.h"

namespace acc {
namespace {

constexpr int64_t kLowrankSeed = 42;  // PEFT's SVDHook: IncrementalPCA(lowrank=True, lowrank_seed=42)
constexpr int64_t kLowrankNiter = 4;  // IncrementalPCA's lowrank_niter default

// torch.random.fork_rng with torch.manual_seed(seed) inside: `run` draws from the generator of
// `device` seeded `seed`, which is given its state back afterwards (on failure too).
template <class Run>
auto with_forked_generator(c10::Device device, uint64_t seed, Run run) {
  at::Generator generator = device.is_cpu() ? global_cpu_generator() : at::globalContext().defaultGenerator(device);
  at::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved = generator.get_state();
    generator.set_current_seed(seed);
  }
  struct Restore {
    at::Generator& generator;
    at::Tensor& saved;
    ~Restore() {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved);
    }
  } restore{generator, saved};
  return run();
}

struct MeanAndVariance {
  at::Tensor mean, variance, count;
};

// PEFT's _incremental_mean_and_var, operation for operation (float64 sums of a float32 batch).
MeanAndVariance incremental_mean_and_var(const at::Tensor& x, const at::Tensor& last_mean,
                                         const at::Tensor& last_variance, const at::Tensor& last_count) {
  const at::Tensor new_count = at::full({1}, x.size(0), at::TensorOptions().dtype(at::kLong).device(x.device()));
  const at::Tensor updated_count = last_count + new_count;
  const at::Tensor last_sum = last_mean.defined() ? last_mean * last_count
                                                  : at::zeros({x.size(1)}, x.options().dtype(at::kDouble));
  const at::Tensor new_sum = x.sum(0, false, at::kDouble);
  const at::Tensor updated_mean = (last_sum + new_sum) / updated_count;
  const at::Tensor t = new_sum / new_count;
  at::Tensor temp = x - t;
  const at::Tensor correction = temp.sum(0, false, at::kDouble).square();
  temp.square_();
  at::Tensor new_unnormalized_variance = temp.sum(0, false, at::kDouble);
  new_unnormalized_variance -= correction / new_count;
  if (!last_variance.defined()) return {updated_mean, new_unnormalized_variance / updated_count, updated_count};
  const at::Tensor last_unnormalized_variance = last_variance * last_count;
  const at::Tensor last_over_new_count = last_count.to(at::kDouble) / new_count;
  const at::Tensor updated_unnormalized_variance =
      last_unnormalized_variance + new_unnormalized_variance +
      last_over_new_count / updated_count * (last_sum / last_over_new_count - new_sum).square();
  return {updated_mean, updated_unnormalized_variance / updated_count, updated_count};
}

}  // namespace

void IncrementalPca::partial_fit(const at::Tensor& batch) {
  require(batch.dim() == 2, "IncrementalPCA takes samples x features, got ", batch.dim(), " dimensions");
  const bool first_pass = !fitted();
  at::Tensor x = batch.scalar_type() == at::kFloat || batch.scalar_type() == at::kDouble ? batch.clone()
                                                                                          : batch.to(at::kFloat);
  const int64_t n_samples = x.size(0), n_features = x.size(1);
  require(n_components_ <= n_features, "n_components=", n_components_, " invalid for n_features=", n_features,
          ", need more rows than columns for IncrementalPCA processing");
  require(n_components_ <= n_samples, "n_components=", n_components_,
          " must be less or equal to the batch number of samples ", n_samples);
  if (first_pass) {
    n_samples_seen_ = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(x.device()));
    n_features_ = n_features;
  }
  require(n_features == n_features_,
          "Number of features of the new batch does not match the number of features of the first batch.");
  const MeanAndVariance col = incremental_mean_and_var(x, mean_, var_, n_samples_seen_);
  if (first_pass) {
    x -= col.mean;
  } else {
    const at::Tensor col_batch_mean = at::mean(x, {0});
    x -= col_batch_mean;
    const at::Tensor mean_correction_factor =
        at::sqrt((n_samples_seen_.to(at::kDouble) / col.count) * n_samples);
    const at::Tensor mean_correction = mean_correction_factor * (mean_ - col_batch_mean);
    x = at::vstack({singular_values_.view({-1, 1}) * components_, x, mean_correction});
  }
  auto [u, s, v] = with_forked_generator(x.device(), kLowrankSeed,
                                         [&] { return svd_lowrank(x, 2 * n_components_, kLowrankNiter); });
  at::Tensor vt = v.transpose(-2, -1);
  // PEFT's _svd_flip(u_based_decision=False): each row of Vt (and column of U) signed so that its
  // largest absolute value is positive.
  const at::Tensor max_abs_rows = at::argmax(at::abs(vt), 1);
  const at::Tensor signs = at::sign(vt.gather(1, max_abs_rows.unsqueeze(1)).squeeze(1));
  u *= signs.slice(0, 0, u.size(1)).view({1, -1});
  vt *= signs.view({-1, 1});
  const at::Tensor explained_variance_ratio = s.pow(2) / at::sum(col.variance * col.count);
  n_samples_seen_ = col.count;
  components_ = vt.slice(0, 0, n_components_);
  singular_values_ = s.slice(0, 0, n_components_);
  mean_ = col.mean;
  var_ = col.variance;
  explained_variance_ratio_ = explained_variance_ratio.slice(0, 0, n_components_);
}

}  // namespace acc

// PEFT's IncrementalPCA (peft/utils/incremental_pca.py, after scikit-learn's) as EVA runs it: each
// batch of a layer's inputs updates the running mean and variance (in float64) and the principal
// components, by torch.svd_lowrank (q = 2 x components, 4 subspace iterations) seeded 42 in a
// forked random state (the global generators are left as they were). The same operations in the
// same dtypes as PEFT's, so the components are PEFT's to the bit where the kernels are the same.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace acc {

class IncrementalPca {
 public:
  explicit IncrementalPca(int64_t n_components) : n_components_(n_components) {}

  // PEFT's partial_fit on `batch` (samples x features; copied, not changed). The first batch fixes
  // the number of features (another later is InvalidArgument); a batch needs at least n_components
  // samples and features (PEFT's ValueError).
  void partial_fit(const at::Tensor& batch);

  bool fitted() const { return components_.defined(); }
  int64_t n_components() const { return n_components_; }
  // components_ (n x features; float32 after the first batch, float64 after later ones: PEFT's
  // promotions), singular_values_ and explained_variance_ratio_. The tensors themselves: an
  // in-place change reaches the next use, as in PEFT (EVA's whitening relies on it).
  const at::Tensor& components() const { return components_; }
  const at::Tensor& singular_values() const { return singular_values_; }
  const at::Tensor& explained_variance_ratio() const { return explained_variance_ratio_; }

 private:
  int64_t n_components_;
  int64_t n_features_ = -1;
  at::Tensor n_samples_seen_;  // int64 [1]
  at::Tensor mean_, var_;      // float64 (features)
  at::Tensor components_, singular_values_, explained_variance_ratio_;
};

}  // namespace acc

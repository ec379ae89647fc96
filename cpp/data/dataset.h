// Map-style datasets: a size and a way to fetch the samples at given indices as batch tensors.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace acc {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The samples at `indices`, collated: one tensor per field with a leading batch dimension.
  // Must be safe to call from several threads at once (loaders prefetch in the background).
  virtual std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) const = 0;
  // One sample: each field without the batch dimension.
  // Sample `index` (by default, a batch of one without its batch dimension).
  virtual std::vector<at::Tensor> get(int64_t index) const;
};

// Fields of equal length (dim 0), in memory or memory-mapped; a batch is an index_select.
class TensorDataset final : public Dataset {
 public:
  explicit TensorDataset(std::vector<at::Tensor> fields);
  int64_t size() const override;
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<at::Tensor>& fields() const { return fields_; }

 private:
  std::vector<at::Tensor> fields_;
  std::vector<bool> mapped_;  // per field: over a memory-mapped file, read under a SIGBUS guard
};

// Samples [start, start + count) of another dataset, without copying.
class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<Dataset> base, int64_t start, int64_t count);
  int64_t size() const override { return count_; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<Dataset> base_;
  int64_t start_, count_;
};

// Images and labels from a pair of IDX files ((Fashion-)MNIST): images become float32 in [0, 1]
// with a channel dimension ([N, 1, H, W]), labels int64 ([N]).
std::shared_ptr<TensorDataset> idx_dataset(const std::string& images_path, const std::string& labels_path);

}  // namespace acc

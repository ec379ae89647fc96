// A map-style dataset whose samples come from a function of the host program: Java, C# and Go
// programs feed their own data through it. Samples are collated by stacking each field.
#pragma once

#include <functional>

#include "data/dataset.h"

namespace acc {

using SampleFn = std::function<std::vector<at::Tensor>(int64_t index)>;
using CollateFn = std::function<std::vector<at::Tensor>(const std::vector<std::vector<at::Tensor>>& samples)>;

// Stacks field k of every sample into field k of the batch; samples must agree in field count
// and shapes (the error names the first sample that does not).
std::vector<at::Tensor> default_collate(const std::vector<std::vector<at::Tensor>>& samples);

class CallbackDataset final : public Dataset {
 public:
  // `sample` may be called from loader threads, several at once.
  CallbackDataset(int64_t size, SampleFn sample);
  int64_t size() const override { return size_; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) const override;
  // The callback's sample as it is (no stacking into a batch of one and back): the loader's collate
  // path asks for samples one by one.
  std::vector<at::Tensor> get(int64_t index) const override;

 private:
  int64_t size_;
  SampleFn sample_;
};

}  // namespace acc

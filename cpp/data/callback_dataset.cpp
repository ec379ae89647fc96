#include "data/callback_dataset.h"

#include "common/error.h"

namespace acc {

std::vector<at::Tensor> default_collate(const std::vector<std::vector<at::Tensor>>& samples) {
  require(!samples.empty(), "collate needs at least one sample");
  const size_t fields = samples[0].size();
  std::vector<at::Tensor> batch;
  for (size_t f = 0; f < fields; ++f) {
    std::vector<at::Tensor> column;
    column.reserve(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      require(samples[i].size() == fields, "sample ", i, " of the batch has ", samples[i].size(),
              " fields but sample 0 has ", fields);
      require(samples[i][f].sizes() == samples[0][f].sizes() &&
                  samples[i][f].scalar_type() == samples[0][f].scalar_type(),
              "field ", f, " of sample ", i, " of the batch is ", samples[i][f].scalar_type(), samples[i][f].sizes(),
              " but sample 0's is ", samples[0][f].scalar_type(), samples[0][f].sizes(),
              ": samples must agree to be stacked (or give the loader a collate function)");
      column.push_back(samples[i][f]);
    }
    batch.push_back(at::stack(column));
  }
  return batch;
}

CallbackDataset::CallbackDataset(int64_t size, SampleFn sample) : size_(size), sample_(std::move(sample)) {
  require(size >= 0, "a dataset size must not be negative, got ", size);
  require(static_cast<bool>(sample_), "the dataset needs a sample function");
}

std::vector<at::Tensor> CallbackDataset::get(int64_t index) const {
  require(index >= 0 && index < size_, "index ", index, " is out of range for a dataset of ", size_, " samples");
  return sample_(index);
}

std::vector<at::Tensor> CallbackDataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<std::vector<at::Tensor>> samples;
  samples.reserve(indices.size());
  for (int64_t i : indices) {
    require(i >= 0 && i < size_, "index ", i, " is out of range for a dataset of ", size_, " samples");
    samples.push_back(sample_(i));
  }
  return default_collate(samples);
}

}  // namespace acc

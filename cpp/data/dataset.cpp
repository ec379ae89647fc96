#include "data/dataset.h"

#include "common/error.h"
#include "data/idx.h"
#include "tensor/mmap.h"

namespace acc {

std::vector<at::Tensor> Dataset::get(int64_t index) const {
  require(index >= 0 && index < size(), "index ", index, " is out of range for a dataset of ", size(), " samples");
  auto batch = get_batch({index});
  for (auto& field : batch) field = field.select(0, 0);
  return batch;
}

TensorDataset::TensorDataset(std::vector<at::Tensor> fields) : fields_(std::move(fields)) {
  require(!fields_.empty(), "a dataset needs at least one field");
  for (size_t i = 0; i < fields_.size(); ++i) {
    require(fields_[i].defined() && fields_[i].dim() >= 1, "field ", i, " must have a sample dimension");
    require(fields_[i].size(0) == fields_[0].size(0), "field ", i, " has ", fields_[i].size(0),
            " samples but field 0 has ", fields_[0].size(0));
    fields_[i] = fields_[i].detach();
    mapped_.push_back(is_mapped_file(fields_[i]));
  }
}

int64_t TensorDataset::size() const { return fields_[0].size(0); }

std::vector<at::Tensor> TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (int64_t i : indices) require(i >= 0 && i < n, "index ", i, " is out of range for a dataset of ", n, " samples");
  at::Tensor idx = at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())},
                                 at::TensorOptions().dtype(at::kLong));
  std::vector<at::Tensor> out;
  out.reserve(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    out.push_back(mapped_[f] ? select_mapped_rows(fields_[f], indices)
                             : fields_[f].index_select(0, idx.to(fields_[f].device())));
  }
  return out;
}

SubsetDataset::SubsetDataset(std::shared_ptr<Dataset> base, int64_t start, int64_t count)
    : base_(std::move(base)), start_(start), count_(count) {
  const int64_t size = base_->size();
  require(start >= 0 && count >= 0 && start <= size && count <= size - start, "subset of ", count,
          " samples from ", start, " is outside the dataset's ", size, " samples");
}

std::vector<at::Tensor> SubsetDataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> shifted;
  shifted.reserve(indices.size());
  for (int64_t i : indices) {
    require(i >= 0 && i < count_, "index ", i, " is out of range for a dataset of ", count_, " samples");
    shifted.push_back(start_ + i);
  }
  return base_->get_batch(shifted);
}

std::shared_ptr<TensorDataset> idx_dataset(const std::string& images_path, const std::string& labels_path) {
  at::Tensor images = read_idx(images_path);
  at::Tensor labels = read_idx(labels_path);
  if (images.dim() != 3 && images.dim() != 4)
    fail(Status::Io, "'", images_path, "' holds a tensor of shape ", images.sizes(), ", not images [N, H, W]");
  if (labels.dim() != 1) fail(Status::Io, "'", labels_path, "' holds a tensor of shape ", labels.sizes(), ", not labels [N]");
  if (images.size(0) != labels.size(0))
    fail(Status::Io, "'", images_path, "' has ", images.size(0), " images but '", labels_path, "' has ", labels.size(0),
         " labels");
  if (images.dim() == 3) images = images.unsqueeze(1);
  images = images.to(at::kFloat).div_(images.scalar_type() == at::kByte ? 255.0 : 1.0);
  return std::make_shared<TensorDataset>(std::vector<at::Tensor>{images, labels.to(at::kLong)});
}

}  // namespace acc

#include "accelerator/prepared_model.h"

#include "precision/autocast.h"

namespace acc {

PreparedModel::PreparedModel(std::shared_ptr<Model> inner, c10::DeviceType device,
                             std::optional<c10::ScalarType> autocast_dtype)
    : inner_(std::move(inner)), device_(device), autocast_dtype_(autocast_dtype) {}

NamedTensors PreparedModel::forward(const std::vector<at::Tensor>& inputs) {
  if (!autocast_dtype_) return inner_->forward(inputs);
  NamedTensors outputs;
  {
    AutocastGuard autocast(device_, autocast_dtype_);
    outputs = inner_->forward(inputs);
  }
  for (auto& entry : outputs)
    if (entry.second.is_floating_point() && entry.second.scalar_type() != at::kDouble)
      entry.second = entry.second.to(at::kFloat);
  return outputs;
}

}  // namespace acc

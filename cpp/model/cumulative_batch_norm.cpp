#include "model/cumulative_batch_norm.h"

#include <torch/nn/modules/batchnorm.h>

namespace acc {
namespace {

template <class Layer>
bool note(torch::nn::Module& module,
          std::vector<std::pair<torch::nn::BatchNormOptions*, c10::optional<double>>>& momenta) {
  auto* layer = dynamic_cast<Layer*>(&module);
  if (!layer) return false;
  layer->reset_running_stats();  // a no-op without track_running_stats, as PyTorch's
  momenta.emplace_back(&layer->options, layer->options.momentum());
  layer->options.momentum(c10::nullopt);
  return true;
}

}  // namespace

CumulativeBatchNorm::CumulativeBatchNorm(torch::nn::Module& root) {
  for (const auto& module : root.modules(/*include_self=*/true))
    if (!note<torch::nn::BatchNorm1dImpl>(*module, momenta_)) note<torch::nn::BatchNorm2dImpl>(*module, momenta_);
}

CumulativeBatchNorm::~CumulativeBatchNorm() {
  for (auto& [options, momentum] : momenta_) options->momentum(momentum);
}

}  // namespace acc

// PyTorch's AveragedModel (torch.optim.swa_utils): running averages of a model's parameters, for
// stochastic weight averaging (SWA: the equal average of every update, AveragedModel's default) or
// an exponential moving average (EMA: get_ema_multi_avg_fn(decay)); and diffusers' EMAModel (an EMA
// whose decay warms up, the one diffusers' training scripts keep). AveragedModel deep-copies the
// module; this keeps copies of its parameters and buffers only, so evaluating the averages means
// writing them into a model: copy_to (an evaluation copy of the model) or swap (in and back out).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/option_table.h"
#include "model/model.h"
#include "tensor/named_tensors.h"

namespace acc {

struct AveragingConfig {
  std::string strategy = "swa";  // swa | ema | diffusers_ema
  // The average's weight, in [0, 1] (diffusers_ema: its most); unset: 0.999 (ema), 0.9999 (diffusers_ema).
  std::optional<double> decay;
  // diffusers_ema's EMAModel settings: the decay's floor, the updates that only copy, and its
  // warm-up 1 - (1 + step / inv_gamma) ** -power instead of (1 + step) / (10 + step).
  double min_decay = 0;
  int64_t update_after_step = 0;
  bool use_ema_warmup = false;
  double inv_gamma = 1;
  double power = 2.0 / 3;
  // Average the buffers too (BatchNorm's running statistics); otherwise each update copies them.
  bool use_buffers = false;
  std::string device;  // where the averages live; empty: where the model's tensors are

  static AveragingConfig from(const Options& options);
};

const OptionTable<AveragingConfig>& averaging_option_table();

class AveragedModel {
 public:
  // Copies `model`'s parameters and buffers (AveragedModel's deepcopy); nothing is averaged yet.
  AveragedModel(const Model& model, AveragingConfig config);

  // update_parameters(model): the first update copies the model's values, later ones average them
  // in; buffers are copied unless use_buffers. `model` must have the tensors the averages were made
  // from (names, shapes, dtypes); its values may be on another device.
  void update(const Model& model);
  int64_t count() const { return n_averaged_.item<int64_t>(); }  // n_averaged: updates so far
  // Writes the averages into `model`'s parameters and buffers.
  void copy_to(Model& model) const;
  // Exchanges the averages with `model`'s values: evaluate or save the averages, swap back.
  void swap(Model& model);

  // AveragedModel.state_dict(): "n_averaged" (int64, 0-dim), then "module.<name>" per tensor.
  NamedTensors state_dict() const;
  // Throws (naming the tensor) unless `state` is such a state dict for these tensors.
  void check_state_dict(const NamedTensors& state) const;
  void load_state_dict(const NamedTensors& state);  // checks everything before changing anything

  const AveragingConfig& config() const { return config_; }

 private:
  // The model's parameters and buffers, checked against the averages' (names, shapes, dtypes);
  // `trainable`, when given, gets each parameter's requires_grad.
  NamedTensors tensors_of(const Model& model, const char* action, std::vector<bool>* trainable = nullptr) const;
  void average(const NamedTensors& current, size_t averaged);  // the first `averaged` tensors
  // diffusers' EMAModel.step: trainable parameters move by (1 - decay) toward the model's, the
  // others are copied. `trainable`: each parameter's requires_grad.
  void diffusers_step(const NamedTensors& current, const std::vector<bool>& trainable);
  double diffusers_decay(int64_t step) const;  // EMAModel.get_decay

  AveragingConfig config_;
  NamedTensors averages_;  // parameters, then buffers, with the model's names
  size_t parameters_;      // how many of averages_ are parameters
  at::Tensor n_averaged_;  // int64 0-dim, where the averages are
};

}  // namespace acc

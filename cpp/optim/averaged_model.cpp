#include "optim/averaged_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "common/compat.h"
#include "common/device.h"
#include "common/error.h"
#include "optim/rule_helpers.h"

namespace acc {

const OptionTable<AveragingConfig>& averaging_option_table() {
  using A = AveragingConfig;
  static const OptionTable<A> table(OptionsKind::AveragedModel, [](OptionTable<A>& t) {
    t.bind("strategy",
           "swa (the equal average of every update), ema (an exponential moving average) or diffusers_ema "
           "(diffusers' EMAModel)",
           &A::strategy)
        .one_of({"swa", "ema", "diffusers_ema"});
    t.bind("decay", "the average's weight at each update (diffusers_ema: its most)", &A::decay).at_least(0).at_most(1);
    t.bind("use_buffers", "average the buffers too, instead of copying them", &A::use_buffers);
    t.bind("min_decay", "diffusers_ema: the decay's floor", &A::min_decay).at_least(0).at_most(1);
    t.bind("update_after_step", "diffusers_ema: updates that copy the weights before averaging starts",
           &A::update_after_step)
        .at_least(0)
        .at_most(1e15);
    t.bind("use_ema_warmup", "diffusers_ema: decay 1 - (1 + step / inv_gamma) ** -power", &A::use_ema_warmup);
    t.bind("inv_gamma", "diffusers_ema: the warm-up's inverse multiplicative factor", &A::inv_gamma).at_least(1e-12);
    t.bind("power", "diffusers_ema: the warm-up's exponent", &A::power).at_least(0);
    t.bind("device", "where the averages are kept (default: where the model's tensors are)", &A::device);
  });
  return table;
}

AveragingConfig AveragingConfig::from(const Options& options) {
  require(options.kind() == OptionsKind::AveragedModel, "averaged model options must be of kind averaged_model, got ",
          options_kind_name(options.kind()));
  AveragingConfig config = averaging_option_table().read(options);
  // A decay with the default strategy would silently average equally.
  require(config.strategy != "swa" || !options.has("decay"), "decay is an ema strategy's; set strategy to ema");
  const bool diffusers = config.strategy == "diffusers_ema";
  for (const char* key : {"min_decay", "update_after_step", "use_ema_warmup", "inv_gamma", "power"})
    require(diffusers || !options.has(key), key, " is the diffusers_ema strategy's");
  require(!diffusers || !config.use_buffers, "diffusers_ema averages parameters only (diffusers' EMAModel); "
          "use_buffers is AveragedModel's (strategy swa or ema)");
  if (!config.decay) config.decay = diffusers ? 0.9999 : 0.999;
  require(*config.decay >= config.min_decay, "decay ", *config.decay, " is below min_decay ", config.min_decay);
  if (!config.device.empty()) parse_device(config.device);  // an unknown or absent device fails here
  return config;
}

namespace {

std::string describe(const at::Tensor& t) {
  std::ostringstream text;
  text << c10::toString(t.scalar_type()) << " " << t.sizes();
  return text.str();
}

// Detached parameters then buffers; `trainable`, when asked for, gets each parameter's requires_grad.
NamedTensors parameters_and_buffers(const Model& model, size_t& parameters, std::vector<bool>* trainable = nullptr) {
  NamedTensors all = model.named_parameters();
  parameters = all.size();
  if (trainable)
    for (const auto& entry : all) trainable->push_back(entry.second.requires_grad());
  for (auto& entry : model.named_buffers()) all.push_back(std::move(entry));
  for (auto& entry : all) entry.second = entry.second.detach();
  return all;
}

void require_averageable(const Model& model, const char* action) {
  if (model.sharded_at_rest())
    fail(Status::Unsupported, "averaged model ", action,
         ": the model is sharded at rest (zero_stage 3), so no process holds its whole parameters");
  model.require_weights(action);
}

bool floating_or_complex(const at::Tensor& t) { return t.is_floating_point() || t.is_complex(); }

// get_swa_avg_fn: avg + (current - avg) / (n + 1), with n an int64 tensor on avg's device.
void swa_average(const at::Tensor& avg, const at::Tensor& current, const at::Tensor& n) {
  avg.copy_(avg + (current - avg) / (n + 1));
}

// get_ema_multi_avg_fn's integer branch: avg * decay + current * (1 - decay), copied back.
void ema_average(const at::Tensor& avg, const at::Tensor& current, double decay) {
  avg.copy_(avg * decay + current * (1 - decay));
}

struct AverageGroup {
  std::vector<at::Tensor> averages, currents;
};

}  // namespace

AveragedModel::AveragedModel(const Model& model, AveragingConfig config) : config_(std::move(config)) {
  require_averageable(model, "create");
  averages_ = parameters_and_buffers(model, parameters_);
  const auto device = config_.device.empty() ? c10::optional<at::Device>() : parse_device(config_.device);
  for (auto& entry : averages_)
    entry.second = device ? entry.second.to(*device, /*non_blocking=*/false, /*copy=*/true) : entry.second.clone();
  // AveragedModel's n_averaged buffer is made on `device`, the CPU without one.
  n_averaged_ = at::zeros({}, at::TensorOptions(device.value_or(at::kCPU)).dtype(at::kLong));
}

NamedTensors AveragedModel::tensors_of(const Model& model, const char* action, std::vector<bool>* trainable) const {
  require_averageable(model, action);
  size_t parameters = 0;
  NamedTensors now = parameters_and_buffers(model, parameters, trainable);
  require(now.size() == averages_.size() && parameters == parameters_, "averaged model ", action, ": the model has ",
          parameters, " parameters and ", now.size() - parameters, " buffers, the averages were made from ",
          parameters_, " and ", averages_.size() - parameters_);
  for (size_t i = 0; i < now.size(); ++i) {
    const auto& [name, t] = now[i];
    const auto& [own_name, avg] = averages_[i];
    const char* kind = i < parameters_ ? "parameter" : "buffer";
    require(name == own_name, "averaged model ", action, ": the model's ", kind, " ", i, " is '", name,
            "', the averages were made from '", own_name, "'");
    require(t.sizes() == avg.sizes() && t.scalar_type() == avg.scalar_type(), "averaged model ", action,
            ": the model's ", kind, " '", name, "' is ", describe(t), ", its average ", describe(avg));
  }
  return now;
}

void AveragedModel::update(const Model& model) {
  require(count() < std::numeric_limits<int64_t>::max(), "the averaged model's count n_averaged is at its largest (",
          count(), "): one more update does not fit");
  std::vector<bool> trainable;
  NamedTensors current = tensors_of(model, "update", &trainable);
  for (size_t i = 0; i < current.size(); ++i) current[i].second = current[i].second.to(averages_[i].second.device());
  if (config_.strategy == "diffusers_ema") {
    diffusers_step(current, trainable);
    return;
  }
  const size_t averaged = config_.use_buffers ? averages_.size() : parameters_;
  if (count() == 0) {
    for (size_t i = 0; i < averaged; ++i) averages_[i].second.copy_(current[i].second);
  } else {
    average(current, averaged);
  }
  for (size_t i = averaged; i < averages_.size(); ++i) averages_[i].second.copy_(current[i].second);
  n_averaged_.add_(1);
}

// AveragedModel.update_parameters once something is averaged: from 2.1 the tensors go by device and
// dtype to get_ema_multi_avg_fn, or for SWA on CUDA to get_swa_multi_avg_fn, both _foreach_lerp_ on
// floating tensors; SWA elsewhere (and everything before 2.1) steps get_swa_avg_fn tensor by tensor.
void AveragedModel::average(const NamedTensors& current, size_t averaged) {
  const bool ema = config_.strategy == "ema";
  DeviceDtypeGroups<AverageGroup> groups;
  std::unordered_map<at::Device, at::Tensor> n_on;  // n_averaged moved once per device the averages are on
  const auto n_averaged_on = [&](const at::Device& device) -> const at::Tensor& {
    auto found = n_on.find(device);
    if (found == n_on.end()) found = n_on.emplace(device, n_averaged_.to(device)).first;
    return found->second;
  };
  for (size_t i = 0; i < averaged; ++i) {
    const at::Tensor& avg = averages_[i].second;
    const at::Tensor& now = current[i].second;
    const bool foreach = compat::kForeachAveraging && floating_or_complex(avg) && (ema || avg.is_cuda());
    if (foreach) {
      auto& group = groups.of(avg);
      group.averages.push_back(avg);
      group.currents.push_back(now);
    } else if (ema) {
      if (floating_or_complex(avg))
        avg.lerp_(now, 1 - *config_.decay);  // 1.x: what _foreach_lerp_ does tensor by tensor
      else
        ema_average(avg, now, *config_.decay);
    } else {
      // Integer buffers on CUDA too: get_swa_multi_avg_fn's addcdiv refuses integer division.
      swa_average(avg, now, n_averaged_on(avg.device()));
    }
  }
#if ACC_FOREACH_AVERAGING
  // SWA's weight is 1 / (n + 1) computed as a float32 tensor, then taken as a number.
  const float swa_weight = 1.0f / static_cast<float>(count() + 1);
  groups.for_each([&](const AverageGroup& group) {
    at::_foreach_lerp_(group.averages, group.currents, ema ? 1 - *config_.decay : static_cast<double>(swa_weight));
  });
#endif
}

// The decay as EMAModel.get_decay computes it, in Python floats: none (a copy) until
// update_after_step + 1 updates, then warming up toward decay, never below min_decay.
double AveragedModel::diffusers_decay(int64_t optimization_step) const {
  const int64_t step = std::max<int64_t>(0, optimization_step - config_.update_after_step - 1);
  if (step <= 0) return 0.0;
  const double s = static_cast<double>(step);
  const double warm = config_.use_ema_warmup ? 1 - std::pow(1 + s / config_.inv_gamma, -config_.power)
                                             : (1 + s) / (10 + s);
  return std::max(std::min(warm, *config_.decay), config_.min_decay);
}

// EMAModel.step (its default, foreach false): s -= (1 - decay) * (s - p) for parameters that
// require gradients, s = p for the others. Buffers, which EMAModel does not keep, follow the model.
void AveragedModel::diffusers_step(const NamedTensors& current, const std::vector<bool>& trainable) {
  const int64_t step = count() + 1;
  const double one_minus_decay = 1 - diffusers_decay(step);
  for (size_t i = 0; i < averages_.size(); ++i) {
    const at::Tensor& avg = averages_[i].second;
    const at::Tensor& now = current[i].second;
    if (i < parameters_ && trainable[i])
      avg.sub_((avg - now) * one_minus_decay);
    else
      avg.copy_(now);
  }
  n_averaged_.add_(1);
}

void AveragedModel::copy_to(Model& model) const {
  const NamedTensors target = tensors_of(model, "copy_to");
  for (size_t i = 0; i < target.size(); ++i) target[i].second.copy_(averages_[i].second);
}

void AveragedModel::swap(Model& model) {
  const NamedTensors target = tensors_of(model, "swap");
  for (size_t i = 0; i < target.size(); ++i) {
    const at::Tensor own = target[i].second.clone();
    target[i].second.copy_(averages_[i].second);
    averages_[i].second.copy_(own);
  }
}

NamedTensors AveragedModel::state_dict() const {
  NamedTensors state{{"n_averaged", n_averaged_}};
  for (const auto& [name, avg] : averages_) state.emplace_back("module." + name, avg);
  return state;
}

void AveragedModel::check_state_dict(const NamedTensors& state) const {
  require(state.size() == averages_.size() + 1, "an averaged model's state has n_averaged and ", averages_.size(),
          " tensors named module.<name>; this one has ", state.size(), " tensors");
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  require(by_name.size() == state.size(), "an averaged model's state names each tensor once");
  const auto count = by_name.find("n_averaged");
  require(count != by_name.end(), "an averaged model's state needs n_averaged");
  const at::Tensor& n = count->second;
  require(n.dim() == 0 && n.scalar_type() == at::kLong, "n_averaged must be an int64 number, got ", describe(n));
  require(n.item<int64_t>() >= 0, "n_averaged must not be negative, got ", n.item<int64_t>());
  for (const auto& [name, avg] : averages_) {
    const auto found = by_name.find("module." + name);
    require(found != by_name.end(), "an averaged model's state lacks 'module.", name, "'");
    require(found->second.sizes() == avg.sizes() && found->second.scalar_type() == avg.scalar_type(), "'module.",
            name, "' is ", describe(found->second), ", the average is ", describe(avg));
  }
}

void AveragedModel::load_state_dict(const NamedTensors& state) {
  check_state_dict(state);
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  for (auto& [name, avg] : averages_) avg.copy_(by_name.at("module." + name));
  n_averaged_.copy_(by_name.at("n_averaged"));
}

}  // namespace acc

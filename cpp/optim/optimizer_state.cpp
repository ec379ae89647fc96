#include "optim/optimizer_state.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/compat.h"
#include "common/error.h"
#include "common/json_input.h"

namespace acc {
namespace {

using nlohmann::json;
using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGD;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

compat::OptimizerStateKey state_key(const at::Tensor& p) { return compat::optimizer_state_key(p); }

std::unordered_map<const c10::TensorImpl*, std::string> parameter_names(Optimizer& optimizer) {
  std::unordered_map<const c10::TensorImpl*, std::string> names;
  for (auto& entry : optimizer.model()->named_parameters()) names.emplace(entry.second.unsafeGetTensorImpl(), entry.first);
  return names;
}

template <class Options>
json adam_options(const Options& o) {
  return {{"lr", o.lr()}, {"beta1", std::get<0>(o.betas())}, {"beta2", std::get<1>(o.betas())}, {"eps", o.eps()},
          {"weight_decay", o.weight_decay()}, {"amsgrad", o.amsgrad()}};
}

template <class Options>
void set_adam_options(Options& o, const json& j) {
  o.lr(j.at("lr").get<double>())
      .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
      .eps(j.at("eps").get<double>())
      .weight_decay(j.at("weight_decay").get<double>())
      .amsgrad(j.at("amsgrad").get<bool>());
}

json group_options(const std::string& algorithm, torch::optim::OptimizerOptions& o) {
  if (algorithm == "adam") return adam_options(static_cast<AdamOptions&>(o));
  if (algorithm == "adamw") return adam_options(static_cast<AdamWOptions&>(o));
  auto& sgd = static_cast<SGDOptions&>(o);
  return {{"lr", sgd.lr()}, {"momentum", sgd.momentum()}, {"dampening", sgd.dampening()},
          {"weight_decay", sgd.weight_decay()}, {"nesterov", sgd.nesterov()}};
}

// The ranges PyTorch's optimizers check at construction, for a group's saved options: a checkpoint
// that holds a negative eps or a beta of 1 is refused, not trained on.
void check_group_options(const std::string& algorithm, const json& j, const std::string& where) {
  require(j.is_object(), where, ": the options are not an object");
  auto number = [&](const char* key, double min, double below) {
    require(j.contains(key) && j[key].is_number(), where, ": '", key, "' must be a number");
    const double v = j[key].get<double>();
    require(std::isfinite(v) && v >= min && v < below, where, ": '", key, "' is ", v, ", outside [", min, ", ",
            below, ")");
  };
  auto flag = [&](const char* key) {
    require(j.contains(key) && j[key].is_boolean(), where, ": '", key, "' must be true or false");
  };
  const double inf = std::numeric_limits<double>::infinity();
  number("lr", 0, inf);
  number("weight_decay", 0, inf);
  if (algorithm == "sgd") {
    number("momentum", 0, inf);
    number("dampening", -inf, inf);
    flag("nesterov");
    return;
  }
  number("beta1", 0, 1);
  number("beta2", 0, 1);
  number("eps", 0, inf);
  flag("amsgrad");
}

void set_group_options(const std::string& algorithm, torch::optim::OptimizerOptions& o, const json& j) {
  if (algorithm == "adam") return set_adam_options(static_cast<AdamOptions&>(o), j);
  if (algorithm == "adamw") return set_adam_options(static_cast<AdamWOptions&>(o), j);
  static_cast<SGDOptions&>(o)
      .lr(j.at("lr").get<double>())
      .momentum(j.at("momentum").get<double>())
      .dampening(j.at("dampening").get<double>())
      .weight_decay(j.at("weight_decay").get<double>())
      .nesterov(j.at("nesterov").get<bool>());
}

// The tensor fields of a parameter's state, by name (undefined ones left out).
template <class State>
std::vector<std::pair<std::string, at::Tensor>> adam_fields(State& s) {
  std::vector<std::pair<std::string, at::Tensor>> fields = {{"exp_avg", s.exp_avg()}, {"exp_avg_sq", s.exp_avg_sq()}};
  if (s.max_exp_avg_sq().defined()) fields.emplace_back("max_exp_avg_sq", s.max_exp_avg_sq());
  fields.emplace_back("step", at::scalar_tensor(s.step(), at::kLong));
  return fields;
}

std::vector<std::pair<std::string, at::Tensor>> state_fields(const std::string& algorithm,
                                                             torch::optim::OptimizerParamState& state) {
  if (algorithm == "adam") return adam_fields(static_cast<AdamParamState&>(state));
  if (algorithm == "adamw") return adam_fields(static_cast<AdamWParamState&>(state));
  auto& sgd = static_cast<SGDParamState&>(state);
  if (!sgd.momentum_buffer().defined()) return {};
  return {{"momentum_buffer", sgd.momentum_buffer()}};
}

template <class State>
std::unique_ptr<torch::optim::OptimizerParamState> make_adam_state(const std::map<std::string, at::Tensor>& f) {
  auto state = std::make_unique<State>();
  state->exp_avg(f.at("exp_avg")).exp_avg_sq(f.at("exp_avg_sq")).step(f.at("step").item<int64_t>());
  if (f.count("max_exp_avg_sq")) state->max_exp_avg_sq(f.at("max_exp_avg_sq"));
  return state;
}

std::unique_ptr<torch::optim::OptimizerParamState> make_state(const std::string& algorithm,
                                                              const std::map<std::string, at::Tensor>& f) {
  if (algorithm == "adam") return make_adam_state<AdamParamState>(f);
  if (algorithm == "adamw") return make_adam_state<AdamWParamState>(f);
  auto state = std::make_unique<SGDParamState>();
  state->momentum_buffer(f.at("momentum_buffer"));
  return state;
}

const std::vector<std::string>& required_fields(const std::string& algorithm) {
  static const std::vector<std::string> adam = {"exp_avg", "exp_avg_sq", "step"};
  static const std::vector<std::string> sgd = {"momentum_buffer"};
  return algorithm == "sgd" ? sgd : adam;
}

template <class State>
void move_adam_state(State& s, const c10::Device& device) {
  s.exp_avg(s.exp_avg().to(device)).exp_avg_sq(s.exp_avg_sq().to(device));
  if (s.max_exp_avg_sq().defined()) s.max_exp_avg_sq(s.max_exp_avg_sq().to(device));
}

}  // namespace

void move_optimizer_state(Optimizer& optimizer, const c10::Device& device) {
  const std::string& algorithm = optimizer.algorithm();
  for (auto& entry : optimizer.impl().state()) {
    auto& state = *entry.second;
    if (algorithm == "adam") {
      move_adam_state(static_cast<AdamParamState&>(state), device);
    } else if (algorithm == "adamw") {
      move_adam_state(static_cast<AdamWParamState&>(state), device);
    } else {
      auto& sgd = static_cast<SGDParamState&>(state);
      if (sgd.momentum_buffer().defined()) sgd.momentum_buffer(sgd.momentum_buffer().to(device));
    }
  }
}

OptimizerSnapshot snapshot_optimizer(Optimizer& optimizer) {
  auto& impl = optimizer.impl();
  const std::string& algorithm = optimizer.algorithm();
  const auto names = parameter_names(optimizer);
  OptimizerSnapshot snapshot;
  json groups = json::array();
  for (auto& group : impl.param_groups()) {
    json params = json::array();
    for (auto& p : group.params()) {
      const std::string& name = names.at(p.unsafeGetTensorImpl());
      params.push_back(name);
      auto it = impl.state().find(state_key(p));
      if (it == impl.state().end()) continue;  // not stepped yet
      for (auto& field : state_fields(algorithm, *it->second))
        snapshot.tensors.emplace_back("state." + name + "." + field.first, field.second.detach().to(at::kCPU));
    }
    groups.push_back({{"params", params}, {"options", group_options(algorithm, group.options())}});
  }
  snapshot.metadata["algorithm"] = algorithm;
  snapshot.metadata["param_groups"] = groups.dump();
  return snapshot;
}

std::function<void()> prepare_optimizer_restore(Optimizer& optimizer, const OptimizerSnapshot& snapshot,
                                                const std::string& source) {
  auto& impl = optimizer.impl();
  const std::string& algorithm = optimizer.algorithm();
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = snapshot.metadata.find(key);
    require(it != snapshot.metadata.end(), source, ": not an optimizer state (no '", key, "' in its metadata)");
    return it->second;
  };
  require(meta("algorithm") == algorithm, source, ": holds the state of a ", meta("algorithm"),
          " optimizer, but this one is ", algorithm);
  const json groups = parse_json_input(meta("param_groups"), source + ": its param_groups metadata");
  require(groups.is_array() && groups.size() == impl.param_groups().size(), source, ": holds ",
          groups.is_array() ? groups.size() : 0, " parameter groups, but the optimizer has ", impl.param_groups().size());

  std::map<std::string, std::map<std::string, at::Tensor>> by_param;
  for (auto& entry : snapshot.tensors) {
    const auto& key = entry.first;
    const auto dot = key.rfind('.');
    require(key.rfind("state.", 0) == 0 && dot > 6, source, ": unexpected tensor '", key, "'");
    by_param[key.substr(6, dot - 6)][key.substr(dot + 1)] = entry.second;
  }

  const auto names = parameter_names(optimizer);
  struct Planned {
    at::Tensor param;
    std::map<std::string, at::Tensor> fields;
  };
  std::vector<Planned> planned;
  size_t used = 0;
  try {
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& params = impl.param_groups()[g].params();
      const json& saved = groups[g].at("params");
      require(saved.size() == params.size(), source, ": parameter group ", g, " holds ", saved.size(),
              " parameters, but the optimizer's has ", params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& name = names.at(params[i].unsafeGetTensorImpl());
        require(saved[i].get<std::string>() == name, source, ": parameter group ", g, " entry ", i, " is '",
                saved[i].get<std::string>(), "', but the optimizer's is '", name, "'");
        auto it = by_param.find(name);
        if (it == by_param.end()) continue;
        ++used;
        for (const auto& field : required_fields(algorithm))
          require(it->second.count(field), source, ": the state of '", name, "' lacks '", field, "'");
        for (auto& field : it->second) {
          if (field.first == "step") continue;
          require(field.second.sizes() == params[i].sizes(), source, ": '", name, ".", field.first, "' has shape ",
                  field.second.sizes(), " but the parameter has ", params[i].sizes());
        }
        planned.push_back({params[i], it->second});
      }
      check_group_options(algorithm, groups[g].at("options"), concat(source, ": parameter group ", g));
      // Applied to a copy first, so a malformed entry fails here and not halfway through the restore.
      auto probe = impl.param_groups()[g].options().clone();
      set_group_options(algorithm, *probe, groups[g].at("options"));
    }
  } catch (const json::exception& e) {
    fail(Status::InvalidArgument, source, ": malformed param_groups metadata: ", e.what());
  }
  require(used == by_param.size(), source, ": holds state for parameters the optimizer does not have");

  return [&impl, algorithm, groups, planned]() {
    at::NoGradGuard no_grad;
    for (size_t g = 0; g < groups.size(); ++g)
      set_group_options(algorithm, impl.param_groups()[g].options(), groups[g].at("options"));
    impl.state().clear();
    for (const auto& p : planned) {
      std::map<std::string, at::Tensor> fields;
      for (auto& field : p.fields)
        fields[field.first] = field.first == "step" ? field.second : field.second.to(p.param.device(), p.param.dtype()).clone();
      impl.state()[state_key(p.param)] = make_state(algorithm, fields);
    }
  };
}

}  // namespace acc

#include "optim/optimizer_state.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <unordered_map>

#include "common/compat.h"
#include "common/error.h"
#include "common/json_input.h"
#include "optim/algorithm.h"

namespace acc {
namespace {

using nlohmann::json;

compat::OptimizerStateKey state_key(const at::Tensor& p) { return compat::optimizer_state_key(p); }

using ParameterNames = std::unordered_map<const c10::TensorImpl*, std::string>;

ParameterNames parameter_names(Optimizer& optimizer) {
  ParameterNames names;
  for (auto& entry : optimizer.model()->named_parameters()) names.emplace(entry.second.unsafeGetTensorImpl(), entry.first);
  return names;
}

// The model's name of a parameter the optimizer steps; a parameter the model no longer has (its
// LoRA adapters merged since the optimizer was made) cannot be saved or restored by name.
const std::string& name_of(const ParameterNames& names, const at::Tensor& p) {
  auto it = names.find(p.unsafeGetTensorImpl());
  require(it != names.end(), "the optimizer steps a parameter its model no longer has (were the model's LoRA adapters "
          "merged after the optimizer was made?): save or load the state before merging");
  return it->second;
}

// Counters stay on the CPU in their own dtype, as do the numbers an algorithm keeps there (NAdam's
// running product); moments follow the parameter.
bool is_counter(const std::string& field) { return field == "step"; }
bool stays_on_cpu(const OptimizerAlgorithm& algorithm, const std::string& field) {
  return is_counter(field) || algorithm.scalar_on_cpu(field);
}

// A saved step count: one whole number >= 0.
void check_counter(const at::Tensor& t, const std::string& where) {
  require(t.numel() == 1, where, " must hold one number, not ", t.numel());
  const double v = t.to(at::kDouble).item<double>();
  require(std::isfinite(v) && v >= 0 && v == std::floor(v) && v < 9.2e18, where, " is ", v,
          ", not a whole number >= 0");
}

}  // namespace

StateFields parameter_state(Optimizer& optimizer, const std::string& name) {
  if (optimizer.holds_state_slices())
    fail(Status::Unsupported, "under sharded data parallelism each process holds slices of the optimizer's state; "
         "acc_save_state writes it whole");
  at::Tensor param;
  for (auto& entry : optimizer.model()->named_parameters())
    if (entry.first == name) param = entry.second;
  require(param.defined(), "the model has no parameter '", name, "'");
  bool held = false;
  for (auto& group : optimizer.impl().param_groups())
    for (auto& p : group.params()) held = held || p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl();
  require(held, "the optimizer does not step '", name, "' (it was frozen when the optimizer was made)");
  StateFields fields;
  auto it = optimizer.impl().state().find(state_key(param));
  if (it == optimizer.impl().state().end()) return fields;
  for (auto& field : optimizer_algorithm(optimizer.algorithm()).state_fields(*it->second))
    fields[field.first] = field.second.detach().clone();
  return fields;
}

at::Tensor parameter_state_field(Optimizer& optimizer, const std::string& name, const std::string& field) {
  const StateFields fields = parameter_state(optimizer, name);
  if (optimizer_algorithm(optimizer.algorithm()).stateless())
    fail(Status::InvalidArgument, "the ", optimizer.algorithm(), " optimizer keeps no state: its update is made from ",
         "the gradient alone");
  if (fields.empty())
    fail(Status::NotInitialized, "'", name, "' has no optimizer state yet: the optimizer has not stepped it");
  auto it = fields.find(field);
  if (it != fields.end()) return it->second;
  std::string known;
  for (const auto& f : fields) known += (known.empty() ? "" : ", ") + f.first;
  fail(Status::InvalidArgument, "the ", optimizer.algorithm(), " optimizer keeps no '", field, "' for '", name,
       "' (it keeps ", known, ")");
}

void move_optimizer_state(Optimizer& optimizer, const c10::Device& device) {
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  for (auto& entry : optimizer.impl().state()) {
    StateFields fields = algorithm.state_fields(*entry.second);
    for (auto& field : fields)
      if (!stays_on_cpu(algorithm, field.first)) field.second = field.second.to(device);
    entry.second = algorithm.make_state(fields);
  }
}

void follow_parameters(Optimizer& optimizer) {
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  auto& impl = optimizer.impl();
  for (auto& group : impl.param_groups())
    for (auto& p : group.params()) {
      auto it = impl.state().find(state_key(p));
      if (it == impl.state().end()) continue;
      StateFields fields = algorithm.state_fields(*it->second);
      bool changed = false;
      for (auto& field : fields) {
        at::Tensor& value = field.second;
        if (!value.is_floating_point() || stays_on_cpu(algorithm, field.first)) continue;
        if (value.scalar_type() == p.scalar_type() && value.device() == p.device()) continue;
        value = value.to(p.device(), p.scalar_type());
        changed = true;
      }
      if (changed) it->second = algorithm.make_state(fields);
    }
}

std::pair<std::string, std::string> split_state_key(const std::string& key, const std::string& source) {
  const auto dot = key.rfind('.');
  require(key.rfind("state.", 0) == 0 && dot != std::string::npos && dot > 6, source, ": unexpected tensor '", key, "'");
  return {key.substr(6, dot - 6), key.substr(dot + 1)};
}

OptimizerSnapshot snapshot_optimizer(Optimizer& optimizer) {
  auto& impl = optimizer.impl();
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  const auto names = parameter_names(optimizer);
  OptimizerSnapshot snapshot;
  for (auto& group : impl.param_groups())
    for (auto& p : group.params()) {
      auto it = impl.state().find(state_key(p));
      if (it == impl.state().end()) continue;  // not stepped yet
      for (auto& field : algorithm.state_fields(*it->second))
        snapshot.tensors.emplace_back("state." + name_of(names, p) + "." + field.first,
                                      field.second.detach().to(at::kCPU));
    }
  snapshot.metadata["algorithm"] = algorithm.name();
  snapshot.metadata["param_groups"] = optimizer_groups(optimizer).dump();
  return snapshot;
}

json optimizer_groups(Optimizer& optimizer) {
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  const auto names = parameter_names(optimizer);
  json groups = json::array();
  for (auto& group : optimizer.impl().param_groups()) {
    json params = json::array();
    for (auto& p : group.params()) params.push_back(name_of(names, p));
    groups.push_back({{"params", params}, {"options", algorithm.options_to_json(group.options())}});
  }
  return groups;
}

std::string describe_optimizer(Optimizer& optimizer) {
  const json groups = optimizer_groups(optimizer);
  std::string text = "algorithm " + optimizer_algorithm(optimizer.algorithm()).name() + "\n";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += concat("group ", g, " options ", groups[g]["options"].dump(), "\n");
    text += concat("group ", g, " parameters ", groups[g]["params"].dump(), "\n");
  }
  return text;
}

std::function<void()> prepare_optimizer_restore(Optimizer& optimizer, const OptimizerSnapshot& snapshot,
                                                const std::string& source) {
  auto& impl = optimizer.impl();
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = snapshot.metadata.find(key);
    require(it != snapshot.metadata.end(), source, ": not an optimizer state (no '", key, "' in its metadata)");
    return it->second;
  };
  require(meta("algorithm") == algorithm.name(), source, ": holds the state of a ", meta("algorithm"),
          " optimizer, but this one is ", algorithm.name());
  const json groups = parse_json_input(meta("param_groups"), source + ": its param_groups metadata");
  require(groups.is_array() && groups.size() == impl.param_groups().size(), source, ": holds ",
          groups.is_array() ? groups.size() : 0, " parameter groups, but the optimizer has ", impl.param_groups().size());

  std::map<std::string, StateFields> by_param;
  for (auto& entry : snapshot.tensors) {
    const auto [param, field] = split_state_key(entry.first, source);
    by_param[param][field] = entry.second;
  }

  const auto names = parameter_names(optimizer);
  struct Planned {
    at::Tensor param;
    StateFields fields;
    json group;  // its group's saved options
  };
  std::vector<Planned> planned;
  size_t used = 0;
  try {
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& params = impl.param_groups()[g].params();
      const json& saved = groups[g].at("params");
      const json& options = groups[g].at("options");
      require(saved.size() == params.size(), source, ": parameter group ", g, " holds ", saved.size(),
              " parameters, but the optimizer's has ", params.size());
      require(options.is_object(), source, ": parameter group ", g, ": the options are not an object");
      algorithm.check_options_json(options, concat(source, ": parameter group ", g));
      // Applied to a copy first, so a malformed entry fails here and not halfway through the restore.
      auto probe = impl.param_groups()[g].options().clone();
      algorithm.set_options_from_json(*probe, options);
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& name = name_of(names, params[i]);
        require(saved[i].get<std::string>() == name, source, ": parameter group ", g, " entry ", i, " is '",
                saved[i].get<std::string>(), "', but the optimizer's is '", name, "'");
        auto it = by_param.find(name);
        if (it == by_param.end()) {
          // Where state exists from the start (Adagrad), a checkpoint always holds it.
          require(!algorithm.initial_state(params[i], *probe), source, ": the state of '", name, "' is missing");
          continue;
        }
        ++used;
        const auto shapes = algorithm.state_shapes(options, params[i]);
        for (const auto& shape : shapes)
          require(it->second.count(shape.first), source, ": the state of '", name, "' lacks '", shape.first, "'");
        for (const auto& field : it->second) {
          const std::string where = concat(source, ": '", name, ".", field.first, "'");
          auto shape = shapes.find(field.first);
          require(shape != shapes.end(), where, " is not part of the state of a ", algorithm.name(),
                  " optimizer with these options");
          require(field.second.sizes() == c10::IntArrayRef(shape->second), where, " has shape ", field.second.sizes(),
                  " but ", c10::IntArrayRef(shape->second), " was expected for a parameter of shape ",
                  params[i].sizes());
          const auto own = algorithm.field_dtype(field.first, options, params[i]);
          if (is_counter(field.first))
            check_counter(field.second, where);
          else if (own)
            require(field.second.scalar_type() == *own, where, " is ", field.second.scalar_type(), ", not ", *own);
          else
            require(at::isFloatingType(field.second.scalar_type()), where, " is not a floating-point tensor");
          algorithm.check_state_field(field.first, field.second, where);
        }
        planned.push_back({params[i], it->second, options});
      }
    }
  } catch (const json::exception& e) {
    fail(Status::InvalidArgument, source, ": malformed param_groups metadata: ", e.what());
  }
  require(used == by_param.size(), source, ": holds state for parameters the optimizer does not have");

  return [&impl, &algorithm, groups, planned]() {
    at::NoGradGuard no_grad;
    for (size_t g = 0; g < groups.size(); ++g)
      algorithm.set_options_from_json(impl.param_groups()[g].options(), groups[g].at("options"));
    impl.state().clear();
    for (const auto& p : planned) {
      StateFields fields;
      for (const auto& field : p.fields)
        fields[field.first] = stays_on_cpu(algorithm, field.first)
                                  ? field.second.clone()  // never a view of the file read
                              : algorithm.field_dtype(field.first, p.group, p.param)
                                  ? field.second.to(p.param.device()).clone()
                                  : field.second.to(p.param.device(), algorithm.state_dtype(p.param)).clone();
      impl.state()[state_key(p.param)] = algorithm.make_state(fields);
    }
  };
}

}  // namespace acc

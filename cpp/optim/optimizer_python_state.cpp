#include "optim/optimizer_python_state.h"

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "optim/optimizer_state.h"

namespace acc {
namespace {

// PyTorch's optimizers keep their step counts as float32 scalars; transformers' Adafactor, as a
// Python int. lion-pytorch's Lion keeps none.
bool torch_optim_algorithm(const std::string& algorithm) { return algorithm != "adafactor" && algorithm != "lion"; }

c10::IValue json_to_python(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return c10::IValue();
  fail(Status::Internal, "an optimizer hyper-parameter of no Python type: ", value.dump());
}

// Our hyper-parameter names are PyTorch's, but for the pairs PyTorch takes as one tuple.
std::vector<std::pair<std::string, c10::IValue>> python_group(const std::string& algorithm,
                                                              const nlohmann::json& options, bool maximize) {
  static const std::vector<std::tuple<const char*, const char*, const char*>> pairs = {
      {"betas", "beta1", "beta2"},
      {"etas", "etaminus", "etaplus"},
      {"step_sizes", "step_size_min", "step_size_max"},
      {"eps", "eps1", "eps2"}};
  std::vector<std::pair<std::string, c10::IValue>> group;
  std::set<std::string> paired;
  for (const auto& [tuple, first, second] : pairs)
    if (options.contains(first) && options.contains(second)) {
      group.emplace_back(tuple, python_tuple({json_to_python(options[first]), json_to_python(options[second])}));
      paired.insert({first, second});
    }
  for (const auto& [key, value] : options.items())
    if (!paired.count(key)) group.emplace_back(key, json_to_python(value));
  if (torch_optim_algorithm(algorithm)) {
    group.emplace_back("maximize", maximize);
    // torch >= 2.7's AdamW is Adam with this flag, which a group without it would take as false.
    if (algorithm == "adam" || algorithm == "adamw") group.emplace_back("decoupled_weight_decay", algorithm == "adamw");
  }
  return group;
}

c10::IValue python_state_field(const std::string& algorithm, const std::string& field, const at::Tensor& value) {
  if (field != "step") return value;
  if (!torch_optim_algorithm(algorithm)) return value.item<int64_t>();
  return value.to(at::kFloat);
}

}  // namespace

void require_python_optimizer_layout(const Optimizer& optimizer) {
  const std::string& algorithm = optimizer.algorithm();
  if (algorithm == "adamw_schedule_free" || algorithm == "sgd_schedule_free")
    fail(Status::Unsupported, "python_state_files: the ", algorithm,
         " optimizer's state is not written in Python's layout (schedulefree's optimizers keep other groups)");
  if (optimizer.holds_state_slices())
    fail(Status::Unsupported,
         "python_state_files: a sharded optimizer's state is not written in Python's layout "
         "(Accelerate's FSDP and DeepSpeed save theirs in their own formats)");
}

c10::IValue python_optimizer_state_dict(Optimizer& optimizer) {
  require_python_optimizer_layout(optimizer);
  const std::string& algorithm = optimizer.algorithm();
  const OptimizerSnapshot snapshot = snapshot_optimizer(optimizer);
  std::map<std::string, std::vector<std::pair<std::string, c10::IValue>>> state_of;
  for (const auto& [key, tensor] : snapshot.tensors) {
    const auto [param, field] = split_state_key(key, "the optimizer's state");
    state_of[param].emplace_back(field, python_state_field(algorithm, field, tensor));
  }
  const nlohmann::json groups = nlohmann::json::parse(snapshot.metadata.at("param_groups"));
  std::vector<std::pair<int64_t, c10::IValue>> state;
  std::vector<c10::IValue> param_groups;
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<c10::IValue> params;
    for (const auto& name : groups[g]["params"]) {
      auto it = state_of.find(name.get<std::string>());
      if (it != state_of.end()) state.emplace_back(index, python_dict(std::move(it->second)));
      params.emplace_back(index++);
    }
    auto group = python_group(algorithm, groups[g]["options"], optimizer.maximize());
    if (const auto initial = optimizer.initial_lr(g)) group.emplace_back("initial_lr", *initial);
    group.emplace_back("params", python_list(std::move(params)));
    param_groups.push_back(python_dict(std::move(group)));
  }
  return python_dict(
      {{"state", python_int_dict(std::move(state))}, {"param_groups", python_list(std::move(param_groups))}});
}

}  // namespace acc

#include "optim/optimizer_python_state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/bnb_python_group.h"
#include "optim/optimizer_state.h"

namespace acc {
namespace {

// PyTorch's optimizers keep their step counts as float32 scalars; transformers' Adafactor and
// bitsandbytes' optimizers, as a Python int. lion-pytorch's Lion keeps none.
bool torch_optim_algorithm(const std::string& algorithm) {
  return algorithm != "adafactor" && algorithm != "lion" && !bitsandbytes_algorithm(algorithm);
}

// Optimizer8bit.state_dict nests a state's codes, maxima and moments under this key (out of FSDP's
// reach); "step" stays beside it.
constexpr const char* kBitsandbytesQuantState = "__bnb_optimizer_quant_state__";

c10::IValue json_to_python(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return c10::IValue();
  fail(Status::Internal, "an optimizer hyper-parameter of no Python type: ", value.dump());
}

// Our hyper-parameter names are PyTorch's, but for the pairs PyTorch takes as one tuple.
const std::vector<std::tuple<const char*, const char*, const char*>>& paired_options() {
  static const std::vector<std::tuple<const char*, const char*, const char*>> pairs = {
      {"betas", "beta1", "beta2"},
      {"etas", "etaminus", "etaplus"},
      {"step_sizes", "step_size_min", "step_size_max"},
      {"eps", "eps1", "eps2"}};
  return pairs;
}

// Keys that PyTorch's schedulers write into a group (initial_lr; OneCycleLR's rates and momenta,
// SWALR's swa_lr): the schedule is the program's, so they are set aside when read.
bool scheduler_key(const std::string& key) {
  return key == "initial_lr" || key == "max_lr" || key == "min_lr" || key == "max_momentum" || key == "base_momentum" ||
         key == "swa_lr";
}

// Keys of a PyTorch group that choose how it computes, not what: set aside when read.
bool implementation_flag(const std::string& key) {
  return key == "foreach" || key == "fused" || key == "capturable" || key == "differentiable";
}

std::vector<std::pair<std::string, c10::IValue>> python_group(const Optimizer& optimizer,
                                                              const nlohmann::json& options) {
  const std::string& algorithm = optimizer.algorithm();
  if (bitsandbytes_algorithm(algorithm)) return bitsandbytes_python_group(algorithm, options);
  std::vector<std::pair<std::string, c10::IValue>> group;
  std::set<std::string> paired;
  for (const auto& [tuple, first, second] : paired_options())
    if (options.contains(first) && options.contains(second)) {
      group.emplace_back(tuple, python_tuple({json_to_python(options[first]), json_to_python(options[second])}));
      paired.insert({first, second});
    }
  for (const auto& [key, value] : options.items())
    if (!paired.count(key)) group.emplace_back(key, json_to_python(value));
  if (torch_optim_algorithm(algorithm)) {
    group.emplace_back("maximize", optimizer.maximize());
    // torch >= 2.7's AdamW is Adam with this flag, which a group without it would take as false.
    if (algorithm == "adam" || algorithm == "adamw") group.emplace_back("decoupled_weight_decay", algorithm == "adamw");
    // How the rule computes: a group without them takes PyTorch's default (None), which on the CPU
    // is the one-tensor rule, rounding otherwise than the foreach rule the run stepped with.
    const std::optional<bool> foreach = optimizer.foreach ();
    group.emplace_back("foreach", foreach ? c10::IValue(*foreach) : c10::IValue());
    if (algorithm == "sgd" || algorithm == "adam" || algorithm == "adamw" || algorithm == "adagrad")
      group.emplace_back("fused", optimizer.fused() ? c10::IValue(true) : c10::IValue());
  }
  return group;
}

c10::IValue python_state_field(const std::string& algorithm, const std::string& field, const at::Tensor& value) {
  if (field != "step") return value;
  if (!torch_optim_algorithm(algorithm)) return value.item<int64_t>();
  return value.to(at::kFloat);
}

nlohmann::json python_to_json(const TorchSavedFile& file, const PickleNode& value, const std::string& where) {
  switch (value.kind) {
    case PickleNode::Kind::Bool:
      return value.boolean;
    case PickleNode::Kind::Int:
      return value.integer;
    case PickleNode::Kind::Float:
      return value.number;
    case PickleNode::Kind::None:
      return nullptr;
    default:
      file.refuse(where, "a number, True, False or None", value);
  }
}

// A Python group's hyper-parameters in our names, over `ours` (the optimizer's own: a key torch's
// version did not write keeps its value, as PyTorch's own setdefault does).
nlohmann::json options_from_python(const Optimizer& optimizer, const TorchSavedFile& file, const PickleNode& group,
                                   nlohmann::json ours, const std::string& where) {
  const std::string& algorithm = optimizer.algorithm();
  for (size_t i = 0; i + 1 < group.items.size(); i += 2) {
    const std::string& key = file.text(*group.items[i], where + " (a key)");
    const PickleNode& value = *group.items[i + 1];
    const std::string at = where + "." + key;
    if (key == "params" || key == "param_names" || scheduler_key(key) || implementation_flag(key)) continue;
    if (bitsandbytes_algorithm(algorithm)) {
      read_bitsandbytes_group_key(algorithm, file, key, value, ours, at);
      continue;
    }
    if (key == "maximize" && !ours.contains(key)) {
      if (file.flag(value, at) != optimizer.maximize())
        fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at, "' is ",
             value.boolean ? "True" : "False", ", but the optimizer ",
             optimizer.maximize() ? "maximizes" : "minimizes");
      continue;
    }
    if (key == "decoupled_weight_decay" && (algorithm == "adam" || algorithm == "adamw")) {
      if (file.flag(value, at) != (algorithm == "adamw"))
        fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at, "' is the state of ",
             value.boolean ? "AdamW" : "Adam", ", but the optimizer is ", algorithm);
      continue;
    }
    bool was_pair = false;
    for (const auto& [tuple, first, second] : paired_options())
      if (key == tuple && ours.contains(first) && value.kind == PickleNode::Kind::Tuple) {
        const auto& items = file.sequence(value, at);
        if (items.size() != 2) file.refuse(at, "a pair", value);
        ours[first] = python_to_json(file, *items[0], at + "[0]");
        ours[second] = python_to_json(file, *items[1], at + "[1]");
        was_pair = true;
      }
    if (was_pair) continue;
    if (!ours.contains(key))
      fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at, "' is not a hyper-parameter of the ",
           algorithm, " optimizer (saved from another algorithm?)");
    ours[key] = python_to_json(file, value, at);
  }
  return ours;
}

// One field of a parameter's state: a tensor, or a number (transformers' Adafactor counts its steps
// in a Python int). None (SGD's momentum_buffer without momentum) is no state.
std::optional<at::Tensor> state_field_from_python(const TorchSavedFile& file, const PickleNode& value,
                                                  const std::string& where) {
  if (value.kind == PickleNode::Kind::None) return std::nullopt;
  if (value.kind == PickleNode::Kind::Int) return at::scalar_tensor(value.integer, at::kLong);
  if (value.kind == PickleNode::Kind::Float) return at::scalar_tensor(value.number, at::kDouble);
  return file.tensor(value, where);
}

}  // namespace

void require_python_optimizer_layout(const Optimizer& optimizer, const std::string& context) {
  const std::string& algorithm = optimizer.algorithm();
  if (algorithm == "adamw_schedule_free" || algorithm == "sgd_schedule_free")
    fail(Status::Unsupported, context, ": the ", algorithm,
         " optimizer's state has no counterpart in Python's layout here (schedulefree's optimizers keep other groups)");
  if (algorithm == "lomo" || algorithm == "adalomo")
    fail(Status::Unsupported, context, ": the ", algorithm,
         " optimizer's state has no counterpart in Python's layout (lomo_optim keeps its moments and counts outside "
         "state_dict, so Python Accelerate's optimizer.bin loses them)");
  if (optimizer.holds_state_slices())
    fail(Status::Unsupported, context,
         ": a sharded optimizer's state has no counterpart in Python's layout here "
         "(Accelerate's FSDP and DeepSpeed save theirs in their own formats)");
}

c10::IValue python_optimizer_state_dict(Optimizer& optimizer, const SchedulerGroupKeys& scheduler_keys) {
  require_python_optimizer_layout(optimizer, "python_state_files");
  const std::string& algorithm = optimizer.algorithm();
  const OptimizerSnapshot snapshot = snapshot_optimizer(optimizer);
  std::map<std::string, std::vector<std::pair<std::string, c10::IValue>>> state_of;
  std::map<std::string, std::vector<std::pair<std::string, c10::IValue>>> quantised_of;  // bitsandbytes'
  for (const auto& [key, tensor] : snapshot.tensors) {
    const auto [param, field] = split_state_key(key, "the optimizer's state");
    if (bitsandbytes_algorithm(algorithm) && field != "step")
      quantised_of[param].emplace_back(field, tensor);
    else
      state_of[param].emplace_back(field, python_state_field(algorithm, field, tensor));
  }
  for (auto& [param, fields] : quantised_of)
    state_of[param].emplace_back(kBitsandbytesQuantState, python_dict(std::move(fields)));
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
    auto group = python_group(optimizer, groups[g]["options"]);
    if (const auto initial = optimizer.initial_lr(g)) group.emplace_back("initial_lr", *initial);
    if (g < scheduler_keys.size())
      for (const auto& [key, value] : scheduler_keys[g]) group.emplace_back(key, value);
    group.emplace_back("params", python_list(std::move(params)));
    param_groups.push_back(python_dict(std::move(group)));
  }
  return python_dict(
      {{"state", python_int_dict(std::move(state))}, {"param_groups", python_list(std::move(param_groups))}});
}

namespace {

// The names a Python group numbers where it lists more parameters than ours: a Python optimizer made
// over model.parameters() also lists the frozen ones (PEFT's examples do), which never get a state.
// Here: our names with every frozen parameter of the model merged in, in the model's order (they
// must all fall in this one group).
std::vector<std::string> with_frozen_parameters(const Optimizer& optimizer, const std::vector<std::string>& names) {
  const std::set<std::string> ours(names.begin(), names.end());
  std::vector<std::string> all;
  for (const auto& [name, tensor] : optimizer.model()->named_parameters())
    if (!tensor.requires_grad() || ours.count(name)) all.push_back(name);
  return all;
}

}  // namespace

OptimizerSnapshot python_optimizer_snapshot(Optimizer& optimizer, const TorchSavedFile& file) {
  require_python_optimizer_layout(optimizer, "loading Python Accelerate's '" + file.path() + "'");
  const nlohmann::json ours = optimizer_groups(optimizer);
  const PickleNode& root = file.root();
  const auto& groups = file.sequence(file.field(root, "param_groups", "the state dict"), "param_groups");
  const PickleNode& state = file.field(root, "state", "the state dict");
  if (state.kind != PickleNode::Kind::Dict) file.refuse("state", "a dict", state);
  if (groups.size() != ours.size())
    fail(Status::InvalidArgument, "checkpoint file '", file.path(), "' holds ", groups.size(),
         " parameter groups, but the optimizer has ", ours.size());
  OptimizerSnapshot snapshot;
  nlohmann::json groups_out = nlohmann::json::array();
  size_t stepped = 0;
  std::set<int64_t> listed;  // torch's indices number the parameters of all groups once each
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string where = concat("param_groups[", g, "]");
    const auto& params = file.sequence(file.field(*groups[g], "params", where), where + ".params");
    const nlohmann::json& names = ours[g]["params"];
    std::vector<std::string> listed_names = names.get<std::vector<std::string>>();
    if (params.size() > listed_names.size()) {
      std::vector<std::string> with_frozen = with_frozen_parameters(optimizer, listed_names);
      if (params.size() != with_frozen.size())
        fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': parameter group ", g, " holds ",
             params.size(), " parameters, but the optimizer's has ", names.size(), " (and ",
             with_frozen.size() - names.size(),
             " frozen ones, which a Python optimizer over model.parameters() also lists: all in one group)");
      listed_names = std::move(with_frozen);
    }
    if (params.size() != listed_names.size())
      fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': parameter group ", g, " holds ",
           params.size(), " parameters, but the optimizer's has ", names.size());
    const std::set<std::string> trainable(names.begin(), names.end());
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t index = file.integer(*params[i], concat(where, ".params[", i, "]"));
      if (!listed.insert(index).second)
        fail(Status::Io, "checkpoint file '", file.path(), "': ", where, ".params lists parameter ", index,
             " a second time");
      const PickleNode* fields = state.find_int(index);
      const std::string& name = listed_names[i];
      if (!trainable.count(name)) {  // a frozen parameter: PyTorch's optimizer never steps it
        if (fields)
          fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': ", where, ".params[", i,
               "] has a state, but it stands where the optimizer's frozen parameter '", name, "' does");
        continue;
      }
      if (!fields) continue;  // not stepped yet
      ++stepped;
      if (fields->kind != PickleNode::Kind::Dict) file.refuse(concat("state[", index, "]"), "a dict", *fields);
      const auto take_fields = [&](const PickleNode& dict, const std::string& prefix, const auto& self) -> void {
        for (size_t f = 0; f + 1 < dict.items.size(); f += 2) {
          const std::string& field = file.text(*dict.items[f], concat(prefix, " (a key)"));
          const std::string at = concat(prefix, ".", field, " (parameter '", name, "')");
          const PickleNode& value = *dict.items[f + 1];
          if (field == kBitsandbytesQuantState && !bitsandbytes_algorithm(optimizer.algorithm()))
            fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': ", at,
                 " is bitsandbytes' quantised state, but the optimizer is ", optimizer.algorithm(),
                 " (saved by one of bitsandbytes' optimizers?)");
          if (field == kBitsandbytesQuantState && prefix.find(kBitsandbytesQuantState) == std::string::npos) {
            if (value.kind != PickleNode::Kind::Dict) file.refuse(at, "a dict", value);
            self(value, concat(prefix, ".", field), self);
          } else if (auto tensor = state_field_from_python(file, value, at)) {
            snapshot.tensors.emplace_back("state." + name + "." + field, *tensor);
          }
        }
      };
      take_fields(*fields, concat("state[", index, "]"), take_fields);
    }
    groups_out.push_back(
        {{"params", names}, {"options", options_from_python(optimizer, file, *groups[g], ours[g]["options"], where)}});
  }
  if (stepped * 2 != state.items.size())
    fail(Status::InvalidArgument, "checkpoint file '", file.path(),
         "' holds state for parameters that none of its groups lists");
  snapshot.metadata["algorithm"] = optimizer_algorithm(optimizer.algorithm()).name();
  snapshot.metadata["param_groups"] = groups_out.dump();
  return snapshot;
}

}  // namespace acc

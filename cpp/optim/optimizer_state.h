// An optimizer's state for checkpoints: each parameter's moments / momentum and step count, and each
// group's hyper-parameters, keyed by parameter *name* (not by address, as torch::optim is), so a
// checkpoint fits any process that builds the same model.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"
#include "optim/algorithm.h"
#include "optim/optimizer.h"

namespace acc {

struct OptimizerSnapshot {
  NamedTensors tensors;                        // "state.<param>.<field>", on the CPU
  std::map<std::string, std::string> metadata;  // "algorithm", "param_groups" (JSON)
};

OptimizerSnapshot snapshot_optimizer(Optimizer& optimizer);
// Each group's parameter names and hyper-parameters ({"params": [...], "options": {...}}), as a
// snapshot's "param_groups" holds them.
nlohmann::json optimizer_groups(Optimizer& optimizer);
// The optimizer's algorithm and each group's hyper-parameters and parameter names, one line each
// (no state): what every process preparing "the same" optimizer must agree on.
std::string describe_optimizer(Optimizer& optimizer);

// A snapshot tensor's key "state.<param>.<field>" as (param, field); anything else is an error
// naming `source`.
std::pair<std::string, std::string> split_state_key(const std::string& key, const std::string& source);

// What PyTorch's optimizer.state[p] holds for the model's parameter `name`, copied, by field: empty
// before the parameter's first step (Adagrad's exists from the start). A name the model lacks, or
// a parameter no group of the optimizer holds, is an error; so is a sharded optimizer's state
// (each process holds slices).
StateFields parameter_state(Optimizer& optimizer, const std::string& name);
// One field of it: before the parameter's first step a NotInitialized error, and a field the
// optimizer does not keep an error naming those it keeps.
at::Tensor parameter_state_field(Optimizer& optimizer, const std::string& name, const std::string& field);

// Moves the per-parameter state (momentum, moments) to a device (prepare's device placement).
void move_optimizer_state(Optimizer& optimizer, const c10::Device& device);
// Casts each parameter's floating state (not its step counts) to the parameter's dtype and device,
// where acc_model_to changed them after steps: the rule PyTorch's load_state_dict applies.
void follow_parameters(Optimizer& optimizer);

// Checks a snapshot against the optimizer (same algorithm, groups of the same parameters and
// hyper-parameters in range, exactly the state fields the algorithm keeps, of the shapes it keeps
// them in) and returns what applies it; the optimizer is untouched until that runs.
// `source` names the snapshot in error messages.

std::function<void()> prepare_optimizer_restore(Optimizer& optimizer, const OptimizerSnapshot& snapshot,
                                                const std::string& source);

}  // namespace acc

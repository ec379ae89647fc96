// Stage 3's units of a TorchScript model (sharded data parallelism gathers a unit's parameters just
// before it runs and frees them after). A scripted forward cannot be paused from outside, so the
// units follow the submodules its forward calls directly (`self.blocks[0](x)`, `self.head(h)`): a
// copy of the forward graph gets a marker before each such call, one passing the tensors it takes
// (where every argument is a tensor or holds none), and one on its tensor result, which run the
// model's UnitHooks (model/model.h). Unit 0 holds the parameters the forward reads itself
// (`self.pos`) and those of submodules it never calls directly; it is gathered for the whole forward.
// A forward the markers cannot follow (a submodule passed to a function, a method of the module
// itself called) keeps one unit for the whole model. A policy (model/unit_policy.h) chooses other
// modules: their calls are marked wherever they are, every other call being inlined first, and a
// chosen module that holds chosen modules is marked around its inlined body, its unit then holding
// what its descendants' units do not (FSDP's nested units).
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "model/unit_policy.h"

namespace acc {

struct ScriptUnitPlan {
  std::vector<std::vector<std::string>> units;  // each unit's parameter names
  // Null when the forward runs as one unit; else forward with the markers, taking self first.
  std::shared_ptr<torch::jit::Graph> graph;
  // Site s's units: site 0 is the whole forward (unit 0), site k > 0 the k-th marked call.
  std::vector<std::vector<size_t>> site_units;
  std::string whole_because;  // why the forward is one unit, when it is
};

// `token` names the model in the markers (see install_unit_hooks). A Classes policy naming a class
// no submodule has is an error (as Accelerate's). Calls of the modules `calls_kept` names (dotted
// paths) stay calls, unmarked, wherever the plan would inline them, so that a later pass still finds
// them (LoRA's adapted layers, model/script_lora.h); they change no unit.
ScriptUnitPlan plan_script_units(const torch::jit::Module& module, int64_t token, const UnitPolicy& policy = {},
                                 const std::set<std::string>& calls_kept = {});

// The modules a policy wraps, by dotted path (never the root): Classes' modules, or those torch's
// size_based_auto_wrap_policy wraps (ModuleList/ModuleDict never, nothing inside a
// MultiheadAttention). Empty for Submodules and Whole.
std::set<std::string> wrapped_module_paths(const torch::jit::Module& module, const UnitPolicy& policy);

// What the markers of `token`'s graph call; empty hooks remove the entry.
void install_unit_hooks(int64_t token, std::vector<std::vector<size_t>> site_units, UnitHooks hooks);

// A process-unique token for a model's markers.
int64_t next_unit_token();

// The submodule each module-typed value of a method's graph is, by dotted path: GetAttr chains from
// the graph's first input (the module itself, "").
using ModulePaths = std::unordered_map<const torch::jit::Value*, std::string>;
ModulePaths module_paths(torch::jit::Graph& graph);

// Inlines every method and function call of `graph`, the callees' own calls included, except the
// method calls `keep` (given the call and its module's path) says to leave as calls.
void inline_calls_except(torch::jit::Graph& graph,
                         const std::function<bool(torch::jit::Node* call, const std::string& path)>& keep);

}  // namespace acc

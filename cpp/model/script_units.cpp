#include "model/script_units.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "model/marker_registry.h"

namespace acc {
namespace {

const char* const kBegin = "acc_internal::unit_begin";
const char* const kEnd = "acc_internal::unit_end";

struct Installed {
  std::vector<std::vector<size_t>> site_units;
  UnitHooks hooks;
};

MarkerRegistry<const Installed>& installed() {
  static MarkerRegistry<const Installed> registry;
  return registry;
}

const std::vector<size_t>& units_of_site(const Installed& entry, int64_t site) {
  require(site >= 0 && static_cast<size_t>(site) < entry.site_units.size(), "a unit marker names site ", site,
          " of ", entry.site_units.size());
  return entry.site_units[static_cast<size_t>(site)];
}

// The markers: JIT operators of our own, conservative (so the optimizer keeps them in place and
// never drops them), that pass the call's tensor through unchanged for autograd.
void register_markers() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kBegin) + "(int token, int site) -> ()",
        [](torch::jit::Stack& stack) {
          const int64_t site = stack.back().toInt();
          const int64_t token = stack[stack.size() - 2].toInt();
          stack.resize(stack.size() - 2);
          if (auto entry = installed().find(token))
            for (size_t unit : units_of_site(*entry, site)) entry->hooks.before(unit);
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kEnd) + "(Tensor output, int token, int site) -> Tensor",
        [](torch::jit::Stack& stack) {
          const int64_t site = stack.back().toInt();
          const int64_t token = stack[stack.size() - 2].toInt();
          at::Tensor output = stack[stack.size() - 3].toTensor();
          stack.resize(stack.size() - 3);
          if (auto entry = installed().find(token))
            for (size_t unit : units_of_site(*entry, site)) output = entry->hooks.after(unit, output);
          stack.emplace_back(std::move(output));
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

bool is_module(const torch::jit::Value* value) {
  const auto cls = value->type()->cast<c10::ClassType>();
  return cls && cls->is_module();
}

std::string join(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

// What the forward graph does with the module and its submodules.
struct Reading {
  std::vector<std::pair<torch::jit::Node*, std::string>> calls;  // calls of a submodule's method, in order
  std::set<std::string> direct;  // tensors the forward reads itself, by full name
  std::string opaque;            // set when the graph uses a module otherwise (the reason)
};

void read_block(torch::jit::Block* block, const ModulePaths& paths, Reading& reading) {
  for (torch::jit::Node* node : block->nodes()) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      auto path = paths.find(node->input(i));
      if (path == paths.end()) continue;
      const bool attribute = node->kind() == c10::prim::GetAttr;
      const bool call = node->kind() == c10::prim::CallMethod && i == 0;
      if (call && path->second.empty()) {
        reading.opaque = "forward calls another method of the module itself";
      } else if (call) {
        reading.calls.emplace_back(node, path->second);
      } else if (!attribute) {
        reading.opaque = "forward passes the module '" + (path->second.empty() ? "self" : path->second) + "' to '" +
                         node->kind().toQualString() + "'";
      }
    }
    if (node->kind() == c10::prim::GetAttr && node->output()->type()->kind() == c10::TypeKind::TensorType) {
      auto base = paths.find(node->input(0));
      if (base != paths.end()) reading.direct.insert(join(base->second, node->s(c10::attr::name)));
    }
    for (torch::jit::Block* inner : node->blocks()) read_block(inner, paths, reading);
  }
}

bool under(const std::string& name, const std::string& path) {
  return name.size() > path.size() && name.compare(0, path.size(), path) == 0 && name[path.size()] == '.';
}

void mark(torch::jit::Graph& graph, torch::jit::Node* call, int64_t token, int64_t site) {
  torch::jit::WithInsertPoint point(call);
  torch::jit::Value* token_value = graph.insertConstant(token);
  torch::jit::Value* site_value = graph.insertConstant(site);
  graph.create(c10::Symbol::fromQualString(kBegin), {token_value, site_value}, 0)->insertBefore(call);
  if (call->outputs().size() != 1 || call->output()->type()->kind() != c10::TypeKind::TensorType) return;
  torch::jit::Node* end = graph.create(c10::Symbol::fromQualString(kEnd), {call->output(), token_value, site_value}, 1);
  end->output()->setType(call->output()->type());
  end->insertAfter(call);
  call->output()->replaceAllUsesAfterNodeWith(end, end->output());
}

void add_module_paths(torch::jit::Block* block, ModulePaths& paths) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::prim::GetAttr && is_module(node->output())) {
      auto base = paths.find(node->input(0));
      if (base != paths.end()) paths[node->output()] = join(base->second, node->s(c10::attr::name));
    }
    for (torch::jit::Block* inner : node->blocks()) add_module_paths(inner, paths);
  }
}

using KeepCall = std::function<bool(torch::jit::Node*, const std::string&)>;

// The first call in `block` (nested blocks included) to inline.
torch::jit::Node* next_to_inline(torch::jit::Block* block, const ModulePaths& paths, const KeepCall& keep) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::prim::CallMethod) {
      auto path = paths.find(node->input(0));
      if (!(path != paths.end() && keep(node, path->second)) && torch::jit::tryToGraphFunction(node)) return node;
    } else if (node->kind() == c10::prim::CallFunction && torch::jit::tryToGraphFunction(node)) {
      return node;
    }
    for (torch::jit::Block* inner : node->blocks())
      if (torch::jit::Node* found = next_to_inline(inner, paths, keep)) return found;
  }
  return nullptr;
}

}  // namespace

void inline_calls_except(torch::jit::Graph& graph, const KeepCall& keep) {
  // One call at a time: each inlining brings the callee's calls into view.
  while (torch::jit::Node* call = next_to_inline(graph.block(), module_paths(graph), keep)) {
    torch::jit::GraphFunction* callee = torch::jit::tryToGraphFunction(call);
    if (call->kind() == c10::prim::CallFunction) call->removeInput(0);  // the function itself
    // The callee's own graph, whose calls are still calls (its optimized graph has them inlined).
    torch::jit::inlineCallTo(call, callee, callee->graph().get());
  }
}

ModulePaths module_paths(torch::jit::Graph& graph) {
  ModulePaths paths{{graph.inputs()[0], ""}};
  add_module_paths(graph.block(), paths);
  return paths;
}

int64_t next_unit_token() {
  static std::atomic<int64_t> next{1};
  return next++;
}

void install_unit_hooks(int64_t token, std::vector<std::vector<size_t>> site_units, UnitHooks hooks) {
  installed().set(token, hooks.before && hooks.after ? std::make_shared<const Installed>(
                                                         Installed{std::move(site_units), std::move(hooks)})
                                                   : nullptr);
}

ScriptUnitPlan plan_script_units(const torch::jit::Module& module, int64_t token,
                                 const std::vector<std::string>& wrap_classes) {
  ScriptUnitPlan plan;
  // Every name a parameter is reachable by, with its first (the one ScriptModel lists): a tied
  // head's weight is the embedding's.
  std::vector<std::string> names;
  std::vector<std::pair<std::string, std::string>> aliases;  // (name, first name)
  std::unordered_map<const c10::TensorImpl*, std::string> first_name;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    auto [it, added] = first_name.emplace(p.value.unsafeGetTensorImpl(), p.name);
    if (added) names.push_back(p.name);
    aliases.emplace_back(p.name, it->second);
  }
  auto whole = [&](std::string why) {
    plan.units = {names};
    plan.site_units.clear();
    plan.graph = nullptr;
    plan.whole_because = std::move(why);
    return plan;
  };
  auto method = module.find_method("forward");
  if (!method) return whole("the module has no forward");
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  if (!wrap_classes.empty()) {
    inline_calls_except(*graph, [&](torch::jit::Node* call, const std::string& path) {
      const auto name = call->input(0)->type()->expect<c10::ClassType>()->name();
      return !path.empty() && name &&
             std::find(wrap_classes.begin(), wrap_classes.end(), name->name()) != wrap_classes.end();
    });
  }
  Reading reading;
  read_block(graph->block(), module_paths(*graph), reading);
  if (!reading.opaque.empty()) return whole(reading.opaque);
  if (reading.calls.empty())
    return whole(wrap_classes.empty() ? "forward calls no submodule" : "forward calls no module of the classes to wrap");

  // Unit 0: what the forward reads itself; then one unit per called submodule, in call order, for
  // its parameters that no earlier unit holds; what is left joins unit 0.
  std::map<std::string, size_t> unit_of_param;
  std::map<std::string, size_t> unit_of_path;
  auto assign = [&](const std::string& name, size_t unit) {
    if (unit_of_param.emplace(name, unit).second) plan.units[unit].push_back(name);
  };
  plan.units.emplace_back();
  for (const auto& [name, parameter] : aliases)
    if (reading.direct.count(name)) assign(parameter, 0);
  for (const auto& [call, path] : reading.calls) {
    if (unit_of_path.count(path)) continue;
    unit_of_path[path] = plan.units.size();
    plan.units.emplace_back();
    for (const auto& [name, parameter] : aliases)
      if (under(name, path)) assign(parameter, plan.units.size() - 1);
  }
  for (const auto& name : names) assign(name, 0);

  register_markers();
  plan.site_units.push_back({0});
  for (const auto& [call, path] : reading.calls) {
    std::set<size_t> touched;
    for (const auto& [name, parameter] : aliases)
      if (under(name, path)) touched.insert(unit_of_param.at(parameter));
    if (touched.empty()) continue;  // a submodule without parameters
    mark(*graph, call, token, static_cast<int64_t>(plan.site_units.size()));
    plan.site_units.emplace_back(touched.begin(), touched.end());
  }
  // Site 0 brackets the whole forward: gathered first, and its end marks a tensor result.
  torch::jit::Node* first = graph->block()->nodes().front();
  torch::jit::Value* result = graph->outputs()[0];
  {
    torch::jit::WithInsertPoint point(first);
    torch::jit::Value* token_value = graph->insertConstant(token);
    torch::jit::Value* site_value = graph->insertConstant(int64_t{0});
    graph->create(c10::Symbol::fromQualString(kBegin), {token_value, site_value}, 0)->insertBefore(first);
    if (result->type()->kind() == c10::TypeKind::TensorType) {
      torch::jit::Node* end = graph->create(c10::Symbol::fromQualString(kEnd), {result, token_value, site_value}, 1);
      end->output()->setType(result->type());
      end->insertBefore(graph->return_node());
      graph->return_node()->replaceInput(0, end->output());
    }
  }
  plan.graph = graph;
  return plan;
}

}  // namespace acc

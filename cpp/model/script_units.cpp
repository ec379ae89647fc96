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
const char* const kInputs = "acc_internal::unit_inputs";

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
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kInputs) + "(Tensor[] inputs, int token, int site) -> ()",
        [](torch::jit::Stack& stack) {
          const int64_t site = stack.back().toInt();
          const int64_t token = stack[stack.size() - 2].toInt();
          const std::vector<at::Tensor> inputs = stack[stack.size() - 3].toTensorVector();
          stack.resize(stack.size() - 3);
          if (auto entry = installed().find(token); entry && entry->hooks.inputs)
            entry->hooks.inputs(units_of_site(*entry, site), inputs);
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

bool is_module(const torch::jit::Value* value) {
  const auto cls = value->type()->cast<c10::ClassType>();
  return cls && cls->is_module();
}

std::string join(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

bool under(const std::string& name, const std::string& path) {
  return name.size() > path.size() && name.compare(0, path.size(), path) == 0 && name[path.size()] == '.';
}

size_t depth(const std::string& path) { return static_cast<size_t>(std::count(path.begin(), path.end(), '.')) + 1; }

std::string class_name(const torch::jit::Module& module) {
  const auto& name = module.type()->name();
  return name ? name->name() : std::string();
}

bool single_tensor_result(const torch::jit::Node* call) {
  return call->outputs().size() == 1 && call->output()->type()->kind() == c10::TypeKind::TensorType;
}

// Whether a value of this type can hold no tensor (an int, a list of floats, None, ...).
bool holds_no_tensor(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::NoneType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::DeviceObjType:
      return true;
    case c10::TypeKind::ListType:
    case c10::TypeKind::TupleType:
    case c10::TypeKind::OptionalType:
    case c10::TypeKind::DictType: {
      const auto contained = type->containedTypes();
      return std::all_of(contained.begin(), contained.end(), [](const c10::TypePtr& t) { return holds_no_tensor(t); });
    }
    default:
      return false;
  }
}

// Before `call` (after its begin marker): the inputs marker, passing every tensor the call takes,
// where each argument is a tensor or holds none (else the call's inputs go unreported).
void mark_inputs(torch::jit::Graph& graph, torch::jit::Node* call, torch::jit::Value* token_value,
                 torch::jit::Value* site_value) {
  std::vector<torch::jit::Value*> tensors;
  for (size_t i = 1; i < call->inputs().size(); ++i) {  // input 0: the module
    torch::jit::Value* input = call->input(i);
    if (input->type()->kind() == c10::TypeKind::TensorType) tensors.push_back(input);
    else if (!holds_no_tensor(input->type())) return;
  }
  torch::jit::Node* list = graph.createList(c10::TensorType::get(), tensors);
  list->insertBefore(call);
  graph.create(c10::Symbol::fromQualString(kInputs), {list->output(), token_value, site_value}, 0)->insertBefore(call);
}

// Puts a begin marker of `site` before `call` and, for a single tensor result, an end marker on it;
// `report_inputs`: the inputs marker too.
void mark(torch::jit::Graph& graph, torch::jit::Node* call, int64_t token, int64_t site, bool report_inputs) {
  torch::jit::WithInsertPoint point(call);
  torch::jit::Value* token_value = graph.insertConstant(token);
  torch::jit::Value* site_value = graph.insertConstant(site);
  graph.create(c10::Symbol::fromQualString(kBegin), {token_value, site_value}, 0)->insertBefore(call);
  if (report_inputs) mark_inputs(graph, call, token_value, site_value);
  if (!single_tensor_result(call)) return;
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

void inline_call(torch::jit::Node* call) {
  torch::jit::GraphFunction* callee = torch::jit::tryToGraphFunction(call);
  if (call->kind() == c10::prim::CallFunction) call->removeInput(0);  // the function itself
  // The callee's own graph, whose calls are still calls (its optimized graph has them inlined).
  torch::jit::inlineCallTo(call, callee, callee->graph().get());
}

// The calls of submodules' methods in `block`, in order, with their modules' paths.
void find_calls(torch::jit::Block* block, const ModulePaths& paths,
                std::vector<std::pair<torch::jit::Node*, std::string>>& calls) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::prim::CallMethod) {
      auto path = paths.find(node->input(0));
      if (path != paths.end() && !path->second.empty()) calls.emplace_back(node, path->second);
    }
    for (torch::jit::Block* inner : node->blocks()) find_calls(inner, paths, calls);
  }
}

int64_t constant_int(torch::jit::Value* value) {
  auto constant = torch::jit::toIValue(value);
  require(constant && constant->isInt(), "a unit marker without a constant site");
  return constant->toInt();
}

void find_ends(torch::jit::Block* block, std::set<int64_t>& ends) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::Symbol::fromQualString(kEnd)) ends.insert(constant_int(node->input(2)));
    for (torch::jit::Block* inner : node->blocks()) find_ends(inner, ends);
  }
}

// What the marked forward graph does with the module and its submodules.
struct Reading {
  std::vector<int64_t> sites;                         // in the order of their begin markers
  std::map<int64_t, std::vector<int64_t>> enclosing;  // the sites open at each site's begin
  // The tensors the graph reads itself (by full name), by the innermost site open there (0: none).
  std::map<int64_t, std::set<std::string>> reads;
  // The modules of calls kept unmarked (calls_kept), by the innermost site open there: such a call
  // reads its module's parameters as an inlined body would.
  std::map<int64_t, std::set<std::string>> kept_calls;
  std::string opaque;  // set when the graph uses a module otherwise (the reason)
};

void read_block(torch::jit::Block* block, const ModulePaths& paths, const std::set<int64_t>& ends,
                const std::set<std::string>& kept, std::vector<int64_t> open, Reading& reading) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::Symbol::fromQualString(kBegin)) {
      const int64_t site = constant_int(node->input(1));
      reading.sites.push_back(site);
      reading.enclosing[site] = open;
      if (ends.count(site)) open.push_back(site);  // without an end it brackets nothing it can see
      continue;
    }
    if (node->kind() == c10::Symbol::fromQualString(kEnd)) {
      if (!open.empty() && open.back() == constant_int(node->input(2))) open.pop_back();
      continue;
    }
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      auto path = paths.find(node->input(i));
      if (path == paths.end()) continue;
      const bool attribute = node->kind() == c10::prim::GetAttr;
      const bool call = node->kind() == c10::prim::CallMethod && i == 0;
      if (call && path->second.empty()) {
        reading.opaque = "forward calls another method of the module itself";
      } else if (!call && !attribute) {
        reading.opaque = "forward passes the module '" + (path->second.empty() ? "self" : path->second) + "' to '" +
                         node->kind().toQualString() + "'";
      }
    }
    if (node->kind() == c10::prim::CallMethod) {
      auto path = paths.find(node->input(0));
      if (path != paths.end() && kept.count(path->second))
        reading.kept_calls[open.empty() ? 0 : open.back()].insert(path->second);
    }
    if (node->kind() == c10::prim::GetAttr && node->output()->type()->kind() == c10::TypeKind::TensorType) {
      auto base = paths.find(node->input(0));
      if (base != paths.end())
        reading.reads[open.empty() ? 0 : open.back()].insert(join(base->second, node->s(c10::attr::name)));
    }
    for (torch::jit::Block* inner : node->blocks()) read_block(inner, paths, ends, kept, open, reading);
  }
}

int64_t parameter_numel(const torch::jit::Module& module) {
  std::set<const c10::TensorImpl*> seen;  // a tied parameter counts once, as in module.parameters()
  int64_t numel = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    if (seen.insert(p.value.unsafeGetTensorImpl()).second) numel += p.value.numel();
  return numel;
}

// torch's _recursive_wrap with size_based_auto_wrap_policy: children first; a module is wrapped
// when the parameters its wrapped descendants leave reach min_num_params. Returns how many
// parameters are wrapped in `module`'s subtree.
int64_t wrap_by_size(const torch::jit::Module& module, const std::string& path, int64_t min_num_params,
                     std::set<std::string>& wrapped) {
  const int64_t numel = parameter_numel(module);
  const std::string cls = class_name(module);
  if (numel < min_num_params || cls == "MultiheadAttention") return 0;  // too small, or a forced leaf
  int64_t in_children = 0;
  for (const auto& child : module.named_children())
    in_children += wrap_by_size(child.value, join(path, child.name), min_num_params, wrapped);
  const bool excluded = path.empty() || cls == "ModuleList" || cls == "ModuleDict";  // the root is FSDP's own
  if (excluded || numel - in_children < min_num_params) return in_children;
  wrapped.insert(path);
  return numel;
}

}  // namespace

void inline_calls_except(torch::jit::Graph& graph, const KeepCall& keep) {
  // One call at a time: each inlining brings the callee's calls into view.
  while (torch::jit::Node* call = next_to_inline(graph.block(), module_paths(graph), keep)) inline_call(call);
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

std::set<std::string> wrapped_module_paths(const torch::jit::Module& module, const UnitPolicy& policy) {
  std::set<std::string> wrapped;
  if (policy.kind == UnitPolicy::Kind::Classes) {
    std::set<std::string> present;
    for (const auto& entry : module.named_modules()) {
      const std::string cls = class_name(entry.value);
      present.insert(cls);  // the root's class too, as Accelerate finds it (the root is a unit anyway)
      if (!entry.name.empty() && std::find(policy.classes.begin(), policy.classes.end(), cls) != policy.classes.end())
        wrapped.insert(entry.name);
    }
    for (const auto& cls : policy.classes) {
      if (present.count(cls)) continue;
      std::string list;
      for (const auto& name : present) list += (list.empty() ? "" : ", ") + name;
      fail(Status::InvalidArgument, "transformer_cls_to_wrap: the model has no module of class '", cls,
           "' (its classes: ", list.empty() ? "none" : list, ")");
    }
  } else if (policy.kind == UnitPolicy::Kind::Size) {
    require(policy.min_num_params > 0, "min_num_params must be positive, got ", policy.min_num_params);
    wrap_by_size(module, "", policy.min_num_params, wrapped);
  }
  return wrapped;
}

ScriptUnitPlan plan_script_units(const torch::jit::Module& module, int64_t token, const UnitPolicy& policy,
                                 const std::set<std::string>& calls_kept) {
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
  const std::map<std::string, std::string> parameter_of(aliases.begin(), aliases.end());
  auto whole = [&](std::string why) {
    plan.units = {names};
    plan.site_units.clear();
    plan.graph = nullptr;
    plan.whole_because = std::move(why);
    return plan;
  };
  std::set<std::string> wrapped = wrapped_module_paths(module, policy);
  if (policy.kind == UnitPolicy::Kind::Whole) return whole("the wrap policy is NO_WRAP");
  auto method = module.find_method("forward");
  if (!method) return whole("the module has no forward");
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  if (policy.kind == UnitPolicy::Kind::Submodules) {  // the submodules the forward calls itself
    std::vector<std::pair<torch::jit::Node*, std::string>> calls;
    find_calls(graph->block(), module_paths(*graph), calls);
    for (const auto& call : calls) wrapped.insert(call.second);
  }
  if (wrapped.empty())
    return whole(policy.kind == UnitPolicy::Kind::Size ? "no module reaches min_num_params"
                                                       : "forward calls no submodule");

  // Calls of wrapped modules stay calls, marked as sites; every other call is inlined, a wrapped
  // module that holds wrapped ones being marked around its inlined body (a region).
  register_markers();
  std::vector<std::string> site_path{""};  // site 0: the whole forward
  std::vector<bool> region{false};
  auto holds_wrapped = [&](const std::string& path) {
    return std::any_of(wrapped.begin(), wrapped.end(), [&](const std::string& w) { return under(w, path); });
  };
  const KeepCall keep = [&](torch::jit::Node*, const std::string& path) {
    return !holds_wrapped(path) && (wrapped.count(path) || calls_kept.count(path));
  };
  for (;;) {
    const ModulePaths paths = module_paths(*graph);
    torch::jit::Node* call = next_to_inline(graph->block(), paths, keep);
    if (!call) break;
    auto path = call->kind() == c10::prim::CallMethod ? paths.find(call->input(0)) : paths.end();
    if (path != paths.end() && wrapped.count(path->second) && single_tensor_result(call)) {
      // A region's body runs its nested units, whose gradients the inputs marker would not wait for.
      mark(*graph, call, token, static_cast<int64_t>(site_path.size()), /*report_inputs=*/false);
      site_path.push_back(path->second);
      region.push_back(true);
    }
    inline_call(call);
  }
  std::vector<std::pair<torch::jit::Node*, std::string>> calls;
  find_calls(graph->block(), module_paths(*graph), calls);
  for (const auto& [call, path] : calls) {
    if (!wrapped.count(path)) continue;
    mark(*graph, call, token, static_cast<int64_t>(site_path.size()), /*report_inputs=*/true);
    site_path.push_back(path);
    region.push_back(false);
  }

  std::set<int64_t> ends;
  find_ends(graph->block(), ends);
  Reading reading;
  std::set<std::string> kept;  // the calls kept unmarked: wrapped calls are sites, read as such
  for (const auto& path : calls_kept)
    if (!wrapped.count(path)) kept.insert(path);
  read_block(graph->block(), module_paths(*graph), ends, kept, {}, reading);
  for (const auto& [site, modules] : reading.kept_calls)
    for (const auto& [name, parameter] : aliases)
      for (const auto& module : modules)
        if (under(name, module)) reading.reads[site].insert(name);
  if (!reading.opaque.empty()) return whole(reading.opaque);
  if (reading.sites.empty())
    return whole(policy.kind == UnitPolicy::Kind::Classes ? "forward calls no module of the classes to wrap"
                                                          : "forward calls no module to wrap");

  // Unit 0: what the forward reads outside every site; then one unit per wrapped module reached,
  // in the forward's order, holding its parameters that no deeper reached module holds (a tie
  // goes to the earlier unit); what is left joins unit 0.
  std::vector<std::string> unit_paths{""};
  std::map<std::string, size_t> unit_of_path;
  for (int64_t site : reading.sites) {
    const std::string& path = site_path.at(static_cast<size_t>(site));
    if (unit_of_path.emplace(path, unit_paths.size()).second) unit_paths.push_back(path);
  }
  plan.units.resize(unit_paths.size());
  std::map<std::string, size_t> unit_of_param;
  auto assign = [&](const std::string& name, size_t unit) {
    if (unit_of_param.emplace(name, unit).second) plan.units[unit].push_back(name);
  };
  for (const auto& [name, parameter] : aliases)
    if (reading.reads[0].count(name)) assign(parameter, 0);
  std::map<std::string, size_t> deepest;  // parameter -> its unit
  for (const auto& [name, parameter] : aliases) {
    for (size_t u = 1; u < unit_paths.size(); ++u) {
      if (!under(name, unit_paths[u])) continue;
      auto it = deepest.find(parameter);
      if (it == deepest.end() || depth(unit_paths[u]) > depth(unit_paths[it->second])) deepest[parameter] = u;
    }
  }
  for (const auto& [name, parameter] : aliases)
    if (auto it = deepest.find(parameter); it != deepest.end()) assign(parameter, it->second);
  for (const auto& name : names) assign(name, 0);

  // Each site gathers what runs inside it: a call its module's parameters wherever they are held
  // (a tied head: the embedding's unit), a region its own unit and what its body reads itself;
  // never what an enclosing site holds, which its end would release too early.
  plan.site_units.assign(site_path.size(), {});
  plan.site_units[0] = {0};
  for (int64_t site : reading.sites) {
    const size_t s = static_cast<size_t>(site);
    std::set<size_t> touched;
    if (region[s]) {
      touched.insert(unit_of_path.at(site_path[s]));
      for (const auto& name : reading.reads[site])
        if (auto p = parameter_of.find(name); p != parameter_of.end()) touched.insert(unit_of_param.at(p->second));
    } else {
      for (const auto& [name, parameter] : aliases)
        if (under(name, site_path[s])) touched.insert(unit_of_param.at(parameter));
    }
    touched.erase(0);
    for (int64_t outer : reading.enclosing[site])
      for (size_t u : plan.site_units[static_cast<size_t>(outer)]) touched.erase(u);
    plan.site_units[s].assign(touched.begin(), touched.end());
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

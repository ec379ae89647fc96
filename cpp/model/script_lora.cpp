#include "model/script_lora.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <map>
#include <mutex>

#include "common/error.h"
#include "model/marker_registry.h"
#include "model/script_units.h"

namespace acc {
namespace {

const char* const kOutput = "acc_internal::lora_output";
const char* const kInput = "acc_internal::lora_input";

MarkerRegistry<MarkedAdapters>& installed() {
  static MarkerRegistry<MarkedAdapters> registry;
  return registry;
}

// The marker: a conservative JIT operator of our own (kept in place by the optimizer), returning
// the adapted output; autograd goes through the adapter's own tensor operations.
void register_marker() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kOutput) + "(Tensor input, Tensor output, int token, int layer) -> Tensor",
        [](torch::jit::Stack& stack) {
          const int64_t layer = stack.back().toInt();
          const int64_t token = stack[stack.size() - 2].toInt();
          at::Tensor output = stack[stack.size() - 3].toTensor();
          const at::Tensor input = stack[stack.size() - 4].toTensor();
          stack.resize(stack.size() - 4);
          if (auto entry = installed().find(token)) {
            require(layer >= 0 && static_cast<size_t>(layer) < entry->adapters.size(), "a LoRA marker names layer ",
                    layer, " of ", entry->adapters.size());
            const OutputAdapter& adapter = entry->adapters[static_cast<size_t>(layer)];
            if (adapter) output = adapter(input, output, entry->training && entry->training());
          }
          stack.emplace_back(std::move(output));
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kInput) + "(Tensor input, int token, int layer) -> Tensor",
        [](torch::jit::Stack& stack) {
          const int64_t layer = stack.back().toInt();
          const int64_t token = stack[stack.size() - 2].toInt();
          at::Tensor input = stack[stack.size() - 3].toTensor();
          stack.resize(stack.size() - 3);
          if (auto entry = installed().find(token)) {
            require(layer >= 0 && static_cast<size_t>(layer) < entry->adapters.size(), "a LoRA marker names layer ",
                    layer, " of ", entry->adapters.size());
            if (static_cast<size_t>(layer) < entry->inputs.size() && entry->inputs[static_cast<size_t>(layer)])
              input = entry->inputs[static_cast<size_t>(layer)](input, entry->training && entry->training());
          }
          stack.emplace_back(std::move(input));
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

void collect_calls(torch::jit::Block* block, const ModulePaths& paths, const std::map<std::string, int64_t>& layers,
                   std::vector<std::pair<torch::jit::Node*, int64_t>>& calls) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::prim::CallMethod) {
      auto path = paths.find(node->input(0));
      if (path != paths.end() && layers.count(path->second)) calls.emplace_back(node, layers.at(path->second));
    }
    for (torch::jit::Block* inner : node->blocks()) collect_calls(inner, paths, layers, calls);
  }
}

using LayerCalls = std::vector<std::pair<torch::jit::Node*, int64_t>>;

// Inlines every call in `graph` but the forwards of `layers`; returns those calls, each with its
// layer's index.
LayerCalls inline_all_but_layer_calls(torch::jit::Graph& graph, const std::vector<std::string>& layers,
                                      const std::set<std::string>& calls_kept = {}) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < layers.size(); ++i) index[layers[i]] = static_cast<int64_t>(i);
  inline_calls_except(graph, [&](torch::jit::Node* call, const std::string& path) {
    return (index.count(path) || calls_kept.count(path)) && call->s(c10::attr::name) == "forward";
  });
  LayerCalls calls;
  collect_calls(graph.block(), module_paths(graph), index, calls);
  return calls;
}

}  // namespace

bool takes_and_returns_a_tensor(const torch::jit::Node* call) {
  return call->inputs().size() == 2 && call->outputs().size() == 1 &&
         call->output()->type()->kind() == c10::TypeKind::TensorType;
}

std::vector<std::string> layers_called_as_modules(const torch::jit::Module& module,
                                                  const std::vector<std::string>& layers) {
  auto method = module.find_method("forward");
  if (!method) return {};
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  LayerCalls calls;
  try {
    calls = inline_all_but_layer_calls(*graph, layers);
  } catch (const std::exception&) {
    return {};  // a forward the markers cannot follow: every layer adapted through its weight
  }
  std::vector<bool> called(layers.size(), false), markable(layers.size(), true);
  for (const auto& [call, layer] : calls) {
    called[static_cast<size_t>(layer)] = true;
    markable[static_cast<size_t>(layer)] = markable[static_cast<size_t>(layer)] && takes_and_returns_a_tensor(call);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < layers.size(); ++i)
    if (called[i] && markable[i]) out.push_back(layers[i]);
  return out;
}

std::shared_ptr<torch::jit::Graph> mark_adapted_linears(const torch::jit::Module& module,
                                                        const std::vector<std::string>& layers, int64_t token,
                                                        const std::set<std::string>& calls_kept, bool mark_inputs) {
  auto method = module.find_method("forward");
  if (!method) fail(Status::Unsupported, "the TorchScript module has no forward method");
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  mark_adapted_linears(*graph, layers, token, calls_kept, mark_inputs);
  return graph;
}

void mark_adapted_linears(torch::jit::Graph& graph, const std::vector<std::string>& layers, int64_t token,
                          const std::set<std::string>& calls_kept, bool mark_inputs) {
  const LayerCalls calls = inline_all_but_layer_calls(graph, layers, calls_kept);
  std::vector<size_t> marked(layers.size(), 0);
  register_marker();
  for (const auto& [call, layer] : calls) {
    if (!takes_and_returns_a_tensor(call))
      fail(Status::Unsupported, "LoRA on '", layers[static_cast<size_t>(layer)],
           "': its forward does not take and return one tensor");
    torch::jit::WithInsertPoint point(call);
    torch::jit::Value* token_value = graph.insertConstant(token);
    torch::jit::Value* layer_value = graph.insertConstant(layer);
    torch::jit::Node* marker = graph.create(c10::Symbol::fromQualString(kOutput),
                                             {call->input(1), call->output(), token_value, layer_value}, 1);
    marker->output()->setType(call->output()->type());
    marker->insertAfter(call);
    call->output()->replaceAllUsesAfterNodeWith(marker, marker->output());
    if (mark_inputs) {  // the call takes the adapted input; the output marker keeps the layer's own
      torch::jit::Node* input_marker =
          graph.create(c10::Symbol::fromQualString(kInput), {call->input(1), token_value, layer_value}, 1);
      input_marker->output()->setType(call->input(1)->type());
      input_marker->insertBefore(call);
      call->replaceInput(1, input_marker->output());
    }
    ++marked[static_cast<size_t>(layer)];
  }
  for (size_t i = 0; i < layers.size(); ++i)
    if (marked[i] == 0)
      fail(Status::Unsupported, "lora_dropout cannot apply to '", layers[i], "': the model's forward never calls it as ",
           "a module (it reads its weight directly), so there is no input to apply dropout to; use lora_dropout 0");
}

void install_output_adapters(int64_t token, std::shared_ptr<MarkedAdapters> adapters) {
  installed().set(token, std::move(adapters));
}

}  // namespace acc

#include "model/quantized_linear.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <map>
#include <mutex>

#include "common/error.h"
#include "model/marker_registry.h"
#include "model/script_lora.h"
#include "model/script_units.h"

namespace acc {

namespace {

const char* const kQuantized = "acc_internal::quantized_linear";

MarkerRegistry<const QuantizedLayers>& installed() {
  static MarkerRegistry<const QuantizedLayers> registry;
  return registry;
}

void register_marker() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::registerOperator(torch::jit::Operator(
        std::string(kQuantized) + "(Tensor input, int token, int layer, bool bias) -> Tensor",
        [](torch::jit::Stack& stack) {
          const bool with_bias = stack.back().toBool();
          const int64_t layer = stack[stack.size() - 2].toInt();
          const int64_t token = stack[stack.size() - 3].toInt();
          const at::Tensor input = stack[stack.size() - 4].toTensor();
          stack.resize(stack.size() - 4);
          auto installed_layers = installed().find(token);
          require(installed_layers && layer >= 0 && static_cast<size_t>(layer) < installed_layers->layers.size(),
                  "a quantised layer's marker names layer ", layer, " of a model that has none such");
          const auto i = static_cast<size_t>(layer);
          const QuantizedLayer& quantized = installed_layers->layers[i];
          const bool training = installed_layers->training && installed_layers->training();
          at::Tensor output = quantized.weight->linear(input, quantized.bias, with_bias, training);
          const OutputAdapter& adapter = installed_layers->adapters[i];
          if (adapter) output = adapter(input, output, training);
          stack.emplace_back(std::move(output));
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

void collect(torch::jit::Block* block, const ModulePaths& paths, const std::map<std::string, int64_t>& layers,
             std::vector<torch::jit::Node*>& calls, std::vector<torch::jit::Node*>& reads) {
  for (torch::jit::Node* node : block->nodes()) {
    auto path = paths.find(node->inputs().empty() ? nullptr : node->input(0));
    if (path != paths.end() && layers.count(path->second)) {
      if (node->kind() == c10::prim::CallMethod) calls.push_back(node);
      if (node->kind() == c10::prim::GetAttr && node->s(c10::attr::name) == "weight") reads.push_back(node);
    }
    for (torch::jit::Block* inner : node->blocks()) collect(inner, paths, layers, calls, reads);
  }
}

// Whether `use` of a quantised layer's weight is the weight of torch.linear with the layer's own bias
// (or none).
bool is_layer_product(const torch::jit::Use& use, const std::string& layer, const ModulePaths& paths) {
  const torch::jit::Node* user = use.user;
  if (user->kind() != c10::aten::linear || use.offset != 1 || user->inputs().size() != 3) return false;
  const torch::jit::Node* bias = user->input(2)->node();
  if (bias->kind() == c10::prim::Constant && user->input(2)->type()->kind() == c10::TypeKind::NoneType) return true;
  if (bias->kind() != c10::prim::GetAttr || bias->s(c10::attr::name) != "bias") return false;
  auto owner = paths.find(bias->input(0));
  return owner != paths.end() && owner->second == layer;
}

// A marker computing layer `layer` of `token` on `input` (with the layer's bias or none), before `node`.
torch::jit::Node* insert_marker(torch::jit::Graph& graph, torch::jit::Node* node, torch::jit::Value* input,
                                int64_t token, int64_t layer, bool bias) {
  torch::jit::WithInsertPoint point(node);
  torch::jit::Value* token_value = graph.insertConstant(token);
  torch::jit::Value* layer_value = graph.insertConstant(layer);
  torch::jit::Value* bias_value = graph.insertConstant(bias);
  torch::jit::Node* marker =
      graph.create(c10::Symbol::fromQualString(kQuantized), {input, token_value, layer_value, bias_value}, 1);
  marker->output()->setType(node->output()->type());
  marker->insertBefore(node);
  return marker;
}

}  // namespace

void mark_quantized_linears(torch::jit::Graph& graph, const std::vector<std::string>& layers, int64_t token) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < layers.size(); ++i) index[layers[i]] = static_cast<int64_t>(i);
  inline_calls_except(graph, [&](torch::jit::Node* call, const std::string& path) {
    return index.count(path) && call->s(c10::attr::name) == "forward";
  });
  const ModulePaths paths = module_paths(graph);
  std::vector<torch::jit::Node*> calls, reads;
  collect(graph.block(), paths, index, calls, reads);
  // A forward that computes the layer itself, torch.linear(x, self.layer.weight, self.layer.bias):
  // each such product becomes a marker; any other use of the weight is refused.
  std::vector<std::pair<torch::jit::Node*, int64_t>> products;
  for (torch::jit::Node* read : reads) {
    const std::string& layer = paths.at(read->input(0));
    for (const torch::jit::Use& use : read->output()->uses()) {
      if (!is_layer_product(use, layer, paths))
        fail(Status::Unsupported, "the forward reads the weight of '", layer, "' other than as torch.linear(x, ",
             "weight, its bias), which quantisation leaves no floating-point weight for; leave it out "
             "(llm_int8_skip_modules)");
      products.emplace_back(use.user, index.at(layer));
    }
  }
  register_marker();
  for (const auto& [product, layer] : products) {
    const bool bias = product->input(2)->type()->kind() != c10::TypeKind::NoneType;
    torch::jit::Node* marker = insert_marker(graph, product, product->input(0), token, layer, bias);
    product->output()->replaceAllUsesWith(marker->output());
    product->destroy();
  }
  for (torch::jit::Node* call : calls) {
    const std::string& layer = paths.at(call->input(0));
    if (call->s(c10::attr::name) != "forward" || !takes_and_returns_a_tensor(call))
      fail(Status::Unsupported, "the forward calls '", layer, "' other than as a layer of one tensor; leave it out ",
           "of the quantised layers (llm_int8_skip_modules)");
    torch::jit::Node* marker = insert_marker(graph, call, call->input(1), token, index.at(layer), true);
    call->output()->replaceAllUsesWith(marker->output());
    call->destroy();
  }
}

std::vector<std::string> QuantizedLayers::modules() const {
  std::vector<std::string> out;
  for (const QuantizedLayer& layer : layers) out.push_back(layer.module);
  return out;
}

std::optional<size_t> QuantizedLayers::index_of(const std::string& module) const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].module == module) return i;
  return std::nullopt;
}

void install_quantized_layers(int64_t token, std::shared_ptr<const QuantizedLayers> layers) {
  installed().set(token, std::move(layers));
}

}  // namespace acc

#include "model/peft/mixed_batch.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "common/error.h"
#include "model/peft/factor_methods.h"

namespace acc {
namespace {

// One adapter's part of a layer's batch: its samples' rows, and what the adapter makes of their
// input and output (their new output).
struct RowsAdapter {
  at::Tensor rows;  // int64 indices into the batch
  std::function<at::Tensor(const at::Tensor& input, const at::Tensor& output)> adapt;
};

// PEFT's lora layer: result[rows] += (lora_B(lora_A(x[rows])) * scaling).to(result's dtype) (no
// dropout in evaluation).
RowsAdapter lora_rows(at::Tensor rows, const LoraAdapter& adapter) {
  return {std::move(rows), [a = adapter.a, b = adapter.b, b_bias = adapter.b_bias, scaling = adapter.scaling](
                               const at::Tensor& input, const at::Tensor& output) {
            const at::Tensor branch = at::linear(at::linear(input.to(a.scalar_type()), a), b, b_bias) * scaling;
            return output + branch.to(output.scalar_type());
          }};
}

// PEFT's RoAd layer: result[rows] = _apply_road(result[rows] in theta's dtype), cast back on assignment:
// what its output adapter computes on those rows.
RowsAdapter road_rows(at::Tensor rows, const LoraAdapter& adapter, const LoraConfig& config) {
  static const auto always = std::make_shared<const bool>(true);
  return {std::move(rows), [adapt = factor_method(PeftType::Road)->output_adapter(adapter, config, always)](
                               const at::Tensor& input, const at::Tensor& output) {
            return adapt(input, output, /*training=*/false).to(output.scalar_type());
          }};
}

// Fails unless `adapters` (named `name`) can take part in a mixed batch through `wiring`.
void require_mixable(const LoraAdapters& adapters, const std::string& name, const OutputWiring& wiring) {
  const LoraConfig& config = adapters.config();
  require(config.peft_type == PeftType::Lora || config.peft_type == PeftType::Road, "adapter_names: adapter '", name,
          "' is PEFT's ", peft_method_name(config.peft_type), "; mixed batches are LoRA's and RoAd's");
  require(!config.use_dora, "Cannot pass adapter_names when DoRA is enabled (adapter '", name, "'), as PEFT");
  if (!adapters.tokens().adapters().empty())
    fail(Status::Unsupported, "adapter_names: adapter '", name,
         "' trains token rows (trainable_token_indices); mixed batches of them are not built here");
  if (!config.modules_to_save.empty())
    fail(Status::Unsupported, "adapter_names: adapter '", name,
         "' has modules to save; mixed batches of their copies are not built here");
  for (const LoraAdapter& adapter : adapters.adapters()) {
    const LinearSite& site = adapter.site;
    const bool plain = (adapter.a.defined() || adapter.method == PeftType::Road) && !site.conv && !site.embedding &&
                       !site.attention && site.owner.empty() && !site.quantized && !adapts_parameter(site);
    if (!plain)
      fail(Status::Unsupported, "adapter_names: adapter '", name, "' adapts '", site.module,
           "', which is not a linear layer the forward calls as a module; mixed batches are built for those only");
    if (!wiring.count(site.module))
      fail(Status::Unsupported, "adapter_names: adapter '", name, "' adapts '", site.module,
           "', which the model's forward runs no adapter on now: a layer whose weight the forward reads itself "
           "(adapted through its weight, which no batch can mix), or, on a TorchScript model, one the active "
           "adapter does not adapt (its forward is marked for the active adapter's layers)");
  }
}

OutputAdapter mixed_output_adapter(std::vector<RowsAdapter> parts, int64_t samples) {
  return [parts = std::move(parts), samples](const at::Tensor& input, const at::Tensor& output, bool) {
    require(input.dim() > 0 && input.size(0) == samples,
            "Length of adapter_names should be the same as the number of inputs, but got ", samples, " and ",
            input.dim() > 0 ? input.size(0) : 0, " respectively");
    at::Tensor result = output;
    for (const RowsAdapter& part : parts)
      result = result.index_put({part.rows},
                                part.adapt(input.index_select(0, part.rows), result.index_select(0, part.rows)));
    return result;
  };
}

}  // namespace

MixedBatch::MixedBatch(const LoraAdapters& active, const std::string& active_name,
                       const std::map<std::string, LoraAdapters>& inactive, const std::vector<std::string>& names,
                       bool training, const OutputWiring& wiring)
    : active_(active) {
  require(!names.empty(), "adapter_names is empty");
  require(!training,
          "Cannot pass adapter_names when the model is in training mode (PEFT's mixed batches are for "
          "evaluation)");
  auto adapters_named = [&](const std::string& name) -> const LoraAdapters* {
    if (name == active_name && !active.empty()) return &active;
    const auto it = inactive.find(name);
    return it == inactive.end() ? nullptr : &it->second;
  };
  std::set<std::string> unknown;
  std::vector<std::string> used;  // each named adapter once, in the order of its first sample
  for (const std::string& name : names) {
    if (name == kBaseAdapterName || std::find(used.begin(), used.end(), name) != used.end()) continue;
    if (adapters_named(name))
      used.push_back(name);
    else
      unknown.insert(name);
  }
  if (!unknown.empty()) {
    std::string listed;
    for (const std::string& name : unknown) listed += (listed.empty() ? "" : ", ") + name;
    fail(Status::InvalidArgument, "Trying to infer with non-existing adapter(s): ", listed);
  }
  if (!active.empty()) require_mixable(active, active_name, wiring);
  for (const std::string& name : used) require_mixable(*adapters_named(name), name, wiring);
  if (!active.enabled()) return;  // PEFT's disabled layers compute their base alone, whatever the names

  // Each layer's parts, the layers the active adapters adapt first, then the others'.
  std::vector<std::string> layers;
  std::map<std::string, std::vector<RowsAdapter>> parts;
  const auto note_layer = [&](const LinearSite& site) {
    if (std::find(layers.begin(), layers.end(), site.module) == layers.end()) layers.push_back(site.module);
  };
  for (const LoraAdapter& adapter : active.adapters()) note_layer(adapter.site);
  for (const std::string& name : used) {
    std::vector<int64_t> rows;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) rows.push_back(static_cast<int64_t>(i));
    const at::Tensor row_tensor = at::tensor(rows, at::kLong);
    const LoraAdapters& adapters = *adapters_named(name);
    for (const LoraAdapter& adapter : adapters.adapters()) {
      note_layer(adapter.site);
      const at::Tensor placed = row_tensor.to(adapter.site.weight.device());
      parts[adapter.site.module].push_back(adapter.method == PeftType::Road
                                               ? road_rows(placed, adapter, adapters.config())
                                               : lora_rows(placed, adapter));
    }
  }
  std::set<std::string> active_layers;
  for (const LoraAdapter& adapter : active.adapters()) active_layers.insert(adapter.site.module);
  for (const std::string& layer : layers) {
    const auto& wire = wiring.at(layer);
    wire(mixed_output_adapter(std::move(parts[layer]), static_cast<int64_t>(names.size())));
    if (!active_layers.count(layer)) unwire_after_.push_back(wire);
  }
}

MixedBatch::~MixedBatch() {
  for (const auto& unwire : unwire_after_) unwire(nullptr);
  active_.install();
}

}  // namespace acc

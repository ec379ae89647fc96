#include "model/unit_lora.h"

#include "tensor/storage.h"

namespace acc {

UnitLora::UnitLora(const LoraAdapters& adapters, std::vector<std::vector<size_t>> adapters_of_unit)
    : adapters_(adapters), adapters_of_unit_(std::move(adapters_of_unit)), in_use_(adapters.size()) {}

UnitHooks UnitLora::wrap(UnitHooks hooks) {
  UnitHooks wrapped;
  wrapped.before = [this, before = std::move(hooks.before)](size_t unit) {
    before(unit);
    adapt(unit);
  };
  wrapped.after = [this, after = std::move(hooks.after)](size_t unit, const at::Tensor& output) {
    at::Tensor result = after(unit, output);  // registers the gather before the unit's backward
    put_away(unit, result);
    return result;
  };
  wrapped.inputs = std::move(hooks.inputs);
  return wrapped;
}

void UnitLora::adapt(size_t unit) {
  // Disabled adapters leave the layers their own weights; put_away then has nothing to take away.
  if (unit >= adapters_of_unit_.size() || !adapters_.enabled()) return;
  for (size_t i : adapters_of_unit_[unit]) {
    const LoraAdapter& adapter = adapters_.adapters()[i];
    in_use_[i] = adapted_weight(adapter.site.weight, adapter);
    adapter.site.use_weight(in_use_[i]);
  }
}

void UnitLora::put_away(size_t unit, const at::Tensor& output) {
  if (unit >= adapters_of_unit_.size()) return;
  for (size_t i : adapters_of_unit_[unit]) {
    const LoraAdapter& adapter = adapters_.adapters()[i];
    adapter.site.use_weight(adapter.site.weight);
    const at::Tensor adapted = std::move(in_use_[i]);
    in_use_[i] = at::Tensor();
    // Without a backward through the unit nothing keeps it; else its memory goes until then.
    if (!adapted.defined() || !adapted.requires_grad() || !output.requires_grad()) continue;
    free_storage(adapted);
    // Runs after the engine's gather (hooks run in the order registered): the same operations on
    // the same values give the same bits.
    output.register_hook([adapted, adapter](const at::Tensor&) {
      at::NoGradGuard no_grad;
      take_storage(adapted, adapted_weight(adapter.site.weight, adapter).contiguous());
    });
  }
}

void UnitLora::restore_all() {
  for (size_t i = 0; i < in_use_.size(); ++i) {
    if (!in_use_[i].defined()) continue;
    const LoraAdapter& adapter = adapters_.adapters()[i];
    adapter.site.use_weight(adapter.site.weight);
    in_use_[i] = at::Tensor();
  }
}

}  // namespace acc

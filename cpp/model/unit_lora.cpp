#include "model/unit_lora.h"

#include "tensor/storage.h"

namespace acc {

UnitLora::UnitLora(const LoraAdapters& adapters, std::vector<std::vector<size_t>> adapters_of_unit,
                   std::vector<std::vector<size_t>> tokens_of_unit)
    : adapters_(adapters), made_of_unit_(std::max(adapters_of_unit.size(), tokens_of_unit.size())) {
  for (size_t unit = 0; unit < adapters_of_unit.size(); ++unit)
    for (size_t i : adapters_of_unit[unit]) {
      const LoraAdapter* adapter = &adapters.adapters()[i];
      made_of_unit_[unit].push_back(made_.size());
      made_.push_back({[adapter] { return adapted_weight(adapter->site.weight, *adapter); },
                       [adapter](const at::Tensor& w) { adapter->site.use_weight(w); },
                       [adapter] { adapter->site.use_weight(adapter->site.weight); }, at::Tensor()});
    }
  for (size_t unit = 0; unit < tokens_of_unit.size(); ++unit)
    for (size_t k : tokens_of_unit[unit]) {
      const TokenAdapter* tokens = &adapters.tokens().adapters()[k];
      made_of_unit_[unit].push_back(made_.size());
      made_.push_back({[tokens] { return TrainableTokens::replaced(tokens->site.weight, *tokens, tokens->delta); },
                       [tokens](const at::Tensor& w) {
                         tokens->site.use_weight(w);
                         for (const auto& tied : tokens->tied) tied.use_weight(w);
                       },
                       [tokens] {
                         tokens->site.use_weight(tokens->site.weight);
                         for (const auto& tied : tokens->tied) tied.use_weight(tied.weight);
                       },
                       at::Tensor()});
    }
}

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
  if (unit >= made_of_unit_.size() || !adapters_.enabled()) return;
  for (size_t i : made_of_unit_[unit]) {
    made_[i].in_use = made_[i].make();
    made_[i].use(made_[i].in_use);
  }
}

void UnitLora::put_away(size_t unit, const at::Tensor& output) {
  if (unit >= made_of_unit_.size()) return;
  for (size_t i : made_of_unit_[unit]) {
    Made& made = made_[i];
    made.restore();
    const at::Tensor weight = std::move(made.in_use);
    made.in_use = at::Tensor();
    // Without a backward through the unit nothing keeps it; else its memory goes until then.
    if (!weight.defined() || !weight.requires_grad() || !output.requires_grad()) continue;
    free_storage(weight);
    // Runs after the engine's gather (hooks run in the order registered): the same operations on
    // the same values give the same bits.
    output.register_hook([weight, make = made.make](const at::Tensor&) {
      at::NoGradGuard no_grad;
      take_storage(weight, make().contiguous());
    });
  }
}

void UnitLora::restore_all() {
  for (Made& made : made_) {
    if (!made.in_use.defined()) continue;
    made.restore();
    made.in_use = at::Tensor();
  }
}

}  // namespace acc

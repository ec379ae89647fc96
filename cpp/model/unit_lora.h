// LoRA's adapted weights (W + (B A) * scaling, model/lora.h) made unit by unit while stage 3 runs a
// TorchScript model by its units (model/script_units.h), instead of for the whole model at the
// start of each forward, which would need every unit gathered at once. A unit's adapted weights are
// made just after its parameters are gathered and taken away after its forward. Autograd keeps them
// for the backward, so their memory is freed too and made again, in place and to the same bits,
// just before the unit's backward, once the unit is gathered again.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

#include "model/lora.h"
#include "model/model.h"

namespace acc {

class UnitLora {
 public:
  // `adapters_of_unit[u]`: the adapters (indices into `adapters`) whose layer's weight is in unit
  // u. `adapters` must outlive this object and keep its adapters while it lives.
  UnitLora(const LoraAdapters& adapters, std::vector<std::vector<size_t>> adapters_of_unit);

  // The engine's hooks with the adapted weights made after `before` and taken away after `after`.
  UnitHooks wrap(UnitHooks hooks);
  // After a forward: every adapted layer computes with its own weight again (a unit whose end the
  // forward did not mark keeps its adapted weights until then).
  void restore_all();

 private:
  void adapt(size_t unit);
  void put_away(size_t unit, const at::Tensor& output);

  const LoraAdapters& adapters_;
  std::vector<std::vector<size_t>> adapters_of_unit_;
  std::vector<at::Tensor> in_use_;  // by adapter: the adapted weight its layer computes with now
};

}  // namespace acc

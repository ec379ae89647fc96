// LoRA's adapted weights (W + (B A) * scaling, model/peft/lora.h) and trainable tokens' replaced weights
// (W with its rows from the delta, model/peft/trainable_tokens.h) made unit by unit while stage 3 runs a
// TorchScript model by its units (model/script_units.h), instead of for the whole model at the
// start of each forward, which would need every unit gathered at once. A unit's weights are made
// just after its parameters are gathered and taken away after its forward. Autograd keeps them
// for the backward, so their memory is freed too and made again, in place and to the same bits,
// just before the unit's backward, once the unit is gathered again.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "model/model.h"
#include "model/peft/lora.h"

namespace acc {

class UnitLora {
 public:
  // `adapters_of_unit[u]`: the adapters (indices into `adapters`) whose layer's weight is in unit
  // u; `tokens_of_unit[u]` the same for its trainable tokens (indices into adapters.tokens()).
  // `adapters` must outlive this object and keep its adapters while it lives.
  UnitLora(const LoraAdapters& adapters, std::vector<std::vector<size_t>> adapters_of_unit,
           std::vector<std::vector<size_t>> tokens_of_unit);

  // The engine's hooks with the weights made after `before` and taken away after `after`.
  UnitHooks wrap(UnitHooks hooks);
  // After a forward: every layer computes with its own weight again (a unit whose end the forward
  // did not mark keeps its made weights until then).
  void restore_all();

 private:
  // One weight a unit computes with in place of a layer's own.
  struct Made {
    std::function<at::Tensor()> make;            // from the gathered parameters
    std::function<void(const at::Tensor&)> use;  // the layers compute with it
    std::function<void()> restore;               // the layers compute with their own again
    at::Tensor in_use;                           // while the unit runs
  };
  void adapt(size_t unit);
  void put_away(size_t unit, const at::Tensor& output);

  const LoraAdapters& adapters_;
  std::vector<Made> made_;
  std::vector<std::vector<size_t>> made_of_unit_;  // indices into made_
};

}  // namespace acc

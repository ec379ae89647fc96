// PEFT's mixed batches (a forward with adapter_names: LoraModel._enable_peft_forward_hooks and
// lora.Linear._mixed_batch_forward): one batch of an evaluation in which sample i computes with the
// named adapter names[i], "__base__" with none, so one model serves several fine-tunes at once.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/output_adapter.h"
#include "model/peft/lora.h"

namespace acc {

// PEFT's name for the base model alone among adapter_names.
constexpr const char* kBaseAdapterName = "__base__";

// While it lives, every layer that the active adapters (`active`, named `active_name`) or the named
// ones among `inactive` (kept aside) adapt computes its base output, then adds to the rows (the
// input's first dimension) of each sample its adapter's branch, B(A(x)) * scaling in the adapter's
// dtype cast to the output's, as PEFT's layer adds it; a layer without a sample's adapter leaves its
// rows as they are. Disabled adapters (set_enabled) leave every row as it is. Then the active
// adapters' wiring comes back. Checks first, wiring nothing on failure: a name that no adapter has
// (PEFT's "non-existing adapter(s)"), a model in training mode (`training`), DoRA (PEFT's
// ValueErrors), as are adapters of methods PEFT mixes no batches of (all but LoRA and RoAd, whose
// rows are rotated as its layer rotates them); trainable tokens, modules to save, and layers other
// than linear ones the forward calls as modules (an embedding, a convolution,
// an attention, a quantised layer, a parameter adapted itself) are Unsupported (not built here), as
// is a layer `wiring` (the model's layers that take an output adapter now, by name: a TorchScript
// model's forward is marked for the active adapter's layers) has none for. A layer whose input has
// another number of rows than `names` fails its forward (PEFT's check).
using OutputWiring = std::map<std::string, std::function<void(OutputAdapter)>>;
class MixedBatch {
 public:
  MixedBatch(const LoraAdapters& active, const std::string& active_name,
             const std::map<std::string, LoraAdapters>& inactive, const std::vector<std::string>& names, bool training,
             const OutputWiring& wiring);
  ~MixedBatch();
  MixedBatch(const MixedBatch&) = delete;
  MixedBatch& operator=(const MixedBatch&) = delete;

 private:
  const LoraAdapters& active_;
  // The layers only adapters kept aside adapt: no adapter once the batch is done.
  std::vector<std::function<void(OutputAdapter)>> unwire_after_;
};

}  // namespace acc

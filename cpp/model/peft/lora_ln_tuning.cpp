// LoraAdapters' side of PEFT's LN tuning (LNTuningConfig): the targeted modules, typically layer
// norms, train themselves. PEFT trains a copy of each beside the original; here they train in place
// and their values at the start are kept, as for the modules to save (lora_saved_modules.cpp), for a
// disabled forward and for unload.
#include <algorithm>

#include "common/error.h"
#include "common/text.h"
#include "model/peft/lora.h"

namespace acc {

size_t LoraAdapters::add_tuned_modules(const LoraConfig& config, const NamedTensors& saved_modules,
                                       bool weights_pending) {
  std::vector<std::string> modules;
  for (const auto& entry : saved_modules) {
    const std::string module = config.tuned_module(entry.first);
    if (module.empty()) continue;  // a module to save
    // PEFT wraps a module once: a targeted module inside another fails there (the outer's wrapper
    // hides it).
    for (const auto& inner : enclosing_modules(entry.first))
      if (inner.size() > module.size() && config.targets(inner))
        fail(Status::InvalidArgument, "LN tuning: target_modules '", config.describe_targets(), "' match '", module,
             "' and '", inner, "' inside it; PEFT wraps a module once: name one of them");
    if (std::find(modules.begin(), modules.end(), module) == modules.end()) modules.push_back(module);
  }
  require(!modules.empty(), "LN tuning: target_modules '", config.describe_targets(),
          "' match no module that holds parameters or buffers (a module matches a name its own name is or ends "
          "with after a dot)");
  take_new(config, {}, {}, {}, {}, saved_modules, weights_pending);
  tuned_modules_ = std::move(modules);
  return tuned_modules_.size();
}

std::vector<at::Tensor> LoraAdapters::restore_originals(bool modules_to_save_too) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> restored;
  for (auto& original : originals_) {
    if (!modules_to_save_too && config_.tuned_module(original.name).empty()) continue;  // a module to save
    original.live.copy_(original.kept);
    original.live.mutable_grad() = at::Tensor();
    restored.push_back(original.live);
  }
  return restored;
}

}  // namespace acc

#include "model/state_dict_order.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace acc {

NamedTensors in_state_dict_order(NamedTensors parameters, NamedTensors buffers,
                                 const std::vector<std::string>& modules) {
  if (modules.empty()) {
    for (auto& entry : buffers) parameters.push_back(std::move(entry));
    return parameters;
  }
  std::unordered_map<std::string, size_t> place;
  for (size_t i = 0; i < modules.size(); ++i) place.emplace(modules[i], i);
  constexpr size_t kOutside = std::numeric_limits<size_t>::max();
  const auto module_of = [&](const std::string& name) {
    size_t dot = name.rfind('.');
    if (dot == std::string::npos) {
      auto root = place.find("");
      return root != place.end() ? root->second : size_t{0};
    }
    for (; dot != std::string::npos && dot > 0; dot = name.rfind('.', dot - 1)) {
      auto it = place.find(name.substr(0, dot));
      if (it != place.end()) return it->second;
    }
    return kOutside;
  };
  // A module's buffers come after its own parameters and before anything of a module visited after
  // it: before the first parameter of a later module. (The parameters' modules only rise, but for
  // adapters a model lists after a layer's subtree: hence the running maximum.)
  std::vector<size_t> highest_module_so_far(parameters.size());
  size_t highest = 0;
  for (size_t i = 0; i < parameters.size(); ++i)
    highest_module_so_far[i] = highest = std::max(highest, module_of(parameters[i].first));
  struct Placed {
    size_t before_parameter, module, index;
  };
  std::vector<Placed> placed;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const size_t module = module_of(buffers[b].first);
    const size_t before = module == kOutside
                              ? parameters.size()
                              : std::upper_bound(highest_module_so_far.begin(), highest_module_so_far.end(), module) -
                                    highest_module_so_far.begin();
    placed.push_back({before, module, b});
  }
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.before_parameter != b.before_parameter ? a.before_parameter < b.before_parameter : a.module < b.module;
  });
  NamedTensors out;
  out.reserve(parameters.size() + buffers.size());
  size_t next = 0;
  for (size_t i = 0; i <= parameters.size(); ++i) {
    for (; next < placed.size() && placed[next].before_parameter == i; ++next)
      out.push_back(std::move(buffers[placed[next].index]));
    if (i < parameters.size()) out.push_back(std::move(parameters[i]));
  }
  return out;
}

}  // namespace acc

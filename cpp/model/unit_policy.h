// Which modules become stage 3's units (sharded data parallelism gathers a unit's parameters just
// before it runs and frees them after): FSDP's auto_wrap_policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acc {

struct UnitPolicy {
  enum class Kind {
    Submodules,  // no policy: the submodules the forward calls (a spec model's layers)
    Classes,     // TRANSFORMER_BASED_WRAP: the modules of these classes, however deep
    Size,        // SIZE_BASED_WRAP: torch's size_based_auto_wrap_policy with min_num_params
    Whole,       // NO_WRAP: the whole model is one unit
  };
  Kind kind = Kind::Submodules;
  std::vector<std::string> classes;  // Classes: class names ("Block"), unqualified
  int64_t min_num_params = 0;        // Size
};

}  // namespace acc

// The order of PyTorch's Module.state_dict(): module by module in the order named_modules() visits
// them (the model itself first, then each child's subtree in turn), each module's own parameters
// before its own buffers. It decides where save_model's shards split (huggingface_hub fills shards
// in state-dict order) and the order acc_get_state_dict lists.
#pragma once

#include <string>
#include <vector>

#include "tensor/named_tensors.h"

namespace acc {

// Merges `buffers` into `parameters` (whose order is kept) as state_dict() lists them, given the
// modules' names in named_modules() order ("" for the model itself). A buffer's module is the
// longest dotted prefix of its name that names a module; a buffer outside every module listed
// (a name with a dot whose prefixes name none) goes last. No `modules`: parameters, then buffers.
NamedTensors in_state_dict_order(NamedTensors parameters, NamedTensors buffers,
                                 const std::vector<std::string>& modules);

}  // namespace acc

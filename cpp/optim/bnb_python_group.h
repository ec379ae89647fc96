// bitsandbytes' optimizers' groups as Python's state_dict holds them: lr, betas, eps and
// weight_decay as each class passes them to Optimizer1State / Optimizer2State (SGD8bit's betas are
// (momentum, dampening), RMSprop8bit's (alpha, momentum), Adagrad8bit's (0, 0), AdEMAMix's a
// triple), and Optimizer2State's alpha, t_alpha and t_beta3. A member that the class fixes (SGD8bit's
// dampening, Lion8bit's eps, Adam8bit's alpha, ...) is written at that value and must have it when
// read. min_8bit_size, ours per group, is the Python optimizer's argument and no group key.
#pragma once

#include <ATen/core/ivalue.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/torch_load.h"

namespace acc {

// Whether `algorithm` is one of bitsandbytes' optimizers (its own state layout).
bool bitsandbytes_algorithm(const std::string& algorithm);

// The group's hyper-parameters from ours (options_to_json's), in bitsandbytes' keys and order.
std::vector<std::pair<std::string, c10::IValue>> bitsandbytes_python_group(const std::string& algorithm,
                                                                           const nlohmann::json& options);

// Reads one key of a saved group (`at` names it) into `ours`: InvalidArgument for a key the class
// has no such member for, or a fixed member at another value.
void read_bitsandbytes_group_key(const std::string& algorithm, const TorchSavedFile& file, const std::string& key,
                                 const PickleNode& value, nlohmann::json& ours, const std::string& at);

}  // namespace acc

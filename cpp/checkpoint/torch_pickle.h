// Files in torch.save's format (a zip of data.pkl and one record per tensor storage), for Python
// tools that read them with torch.load: Python Accelerate's load_state reads its optimizer.bin,
// scheduler.bin, scaler.pt and random_states_<rank>.pkl so, with weights_only=True. libtorch's
// pickle_save tags every container with its TorchScript type (a global weights_only refuses): these
// files hold plain dicts, lists, tuples, numbers, strings and tensors only.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

namespace acc {

// A Python dict with string keys, in the order given.
c10::IValue python_dict(std::vector<std::pair<std::string, c10::IValue>> items);
// A Python dict with int keys (an optimizer state_dict's "state").
c10::IValue python_int_dict(std::vector<std::pair<int64_t, c10::IValue>> items);
c10::IValue python_list(std::vector<c10::IValue> items);
c10::IValue python_floats(const std::vector<double>& values);  // a list of floats
c10::IValue python_tuple(std::vector<c10::IValue> items);

// Writes `value` as torch.save would (tensors copied to the CPU, each its own storage).
void save_torch_pickle(const std::string& path, const c10::IValue& value);

}  // namespace acc

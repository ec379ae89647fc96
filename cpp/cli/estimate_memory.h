// `accelerate estimate-memory`: the memory a model's weights take, and what training it with Adam
// adds (gradients, two moment buffers), per dtype, as Accelerate's table shows it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace acc {

struct ModelSizes {
  int64_t parameters = 0;  // elements
  int64_t trainable = 0;   // elements of parameters that require a gradient
  int64_t buffers = 0;     // elements
  std::string largest_layer;
  int64_t largest_layer_elements = 0;  // parameters and buffers of that layer
};

// The largest layer as Accelerate's calculate_maximum_sizes finds it: the modules without children
// (and the model's own tensors), a module with children counted as its children (a TorchScript model
// keeps no _no_split_modules, so none is kept whole). Modules holding no tensors are not seen.
ModelSizes model_sizes(const Model& model);

// A TorchScript file, or a layer-spec JSON file (a name ending in .json). `weights_pending`: the
// tensors keep their shapes but no memory (a spec's layers are made one at a time), as Accelerate's
// estimate builds the model on the meta device.
std::shared_ptr<Model> load_model_file(const std::string& path, bool weights_pending = false);

struct MemoryRow {
  std::string dtype;
  double largest_layer = 0;  // bytes
  double weights = 0;        // parameters and buffers
  double gradients = -1;     // -1: not trainable in this dtype (int8, int4)
  double adam = -1;          // exp_avg and exp_avg_sq
  double training = -1;      // weights + gradients + Adam states
};

// dtypes: float32, float16, bfloat16, int8, int4. Unknown names are InvalidArgument.
std::vector<MemoryRow> memory_rows(const ModelSizes& sizes, const std::vector<std::string>& dtypes);
std::string memory_table(const std::string& title, const ModelSizes& sizes, const std::vector<MemoryRow>& rows);
std::string memory_json(const ModelSizes& sizes, const std::vector<MemoryRow>& rows);
// 1536 -> "1.50 KiB".
std::string format_bytes(double bytes);

}  // namespace acc

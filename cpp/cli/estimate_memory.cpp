#include "cli/estimate_memory.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "common/files.h"

namespace acc {
namespace {

double bytes_per_element(const std::string& dtype) {
  static const std::map<std::string, double> sizes = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"int8", 1}, {"int4", 0.5}};
  auto it = sizes.find(dtype);
  require(it != sizes.end(), "unknown dtype '", dtype, "' (float32, float16, bfloat16, int8, int4)");
  return it->second;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The modules below `module` ("" for the model) that hold tensors, in the order their tensors come
// (named_children's, for the modules that hold any), and the places in `tensors` of its own.
struct Children {
  std::vector<std::string> modules;
  std::vector<size_t> own_tensors;
};
Children children_of(const std::string& module, const std::vector<std::pair<std::string, int64_t>>& tensors) {
  Children out;
  const std::string prefix = module.empty() ? "" : module + ".";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos) {
      out.own_tensors.push_back(i);
      continue;
    }
    const std::string child = name.substr(0, dot);
    if (std::find(out.modules.begin(), out.modules.end(), child) == out.modules.end()) out.modules.push_back(child);
  }
  return out;
}

// Accelerate's calculate_maximum_sizes / get_max_layer_size: from the model's own tensors and
// children, a module without children is a layer (its size all its tensors'), one with children is
// replaced by them (its own tensors left out, as Accelerate leaves them); the first of the largest.
// `tensors`: the parameters (the first `parameters`), then the buffers.
std::pair<std::string, int64_t> largest_layer(const std::vector<std::pair<std::string, int64_t>>& tensors,
                                              size_t parameters) {
  std::map<std::string, int64_t> sizes;  // every module's and tensor's (compute_module_sizes)
  for (const auto& [name, n] : tensors) {
    sizes[name] += n;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      sizes[name.substr(0, dot)] += n;
  }
  // The model's own parameters, its children, its own buffers (named_parameters(recurse=False), ...).
  const Children root = children_of("", tensors);
  std::deque<std::pair<std::string, bool>> to_treat;  // (name, a module)
  for (size_t i : root.own_tensors)
    if (i < parameters) to_treat.emplace_back(tensors[i].first, false);
  for (const auto& name : root.modules) to_treat.emplace_back(name, true);
  for (size_t i : root.own_tensors)
    if (i >= parameters) to_treat.emplace_back(tensors[i].first, false);
  std::pair<std::string, int64_t> largest{"", 0};
  while (!to_treat.empty()) {
    const auto [name, module] = to_treat.front();
    to_treat.pop_front();
    const std::vector<std::string> children = module ? children_of(name, tensors).modules : std::vector<std::string>{};
    if (children.empty()) {
      if (sizes[name] > largest.second) largest = {name, sizes[name]};
      continue;
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) to_treat.emplace_front(*it, true);
  }
  return largest;
}

}  // namespace

ModelSizes model_sizes(const Model& model) {
  ModelSizes s;
  std::vector<std::pair<std::string, int64_t>> tensors;
  for (const auto& [name, t] : model.named_parameters()) {
    s.parameters += t.numel();
    if (t.requires_grad()) s.trainable += t.numel();
    tensors.emplace_back(name, t.numel());
  }
  const size_t parameters = tensors.size();
  for (const auto& [name, t] : model.named_buffers()) {
    s.buffers += t.numel();
    tensors.emplace_back(name, t.numel());
  }
  std::tie(s.largest_layer, s.largest_layer_elements) = largest_layer(tensors, parameters);
  return s;
}

std::shared_ptr<Model> load_model_file(const std::string& path, bool weights_pending) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    const auto text = read_whole_file(path);
    if (!text) fail(Status::Io, "cannot read layer spec ", path, ": check the path");
    return model_from_spec(*text, weights_pending);
  }
  refuse_unless_regular(path);  // before opening it: a FIFO would block the open
  std::ifstream probe(path);
  if (!probe) fail(Status::Io, "cannot read model file ", path, ": check the path");
  return load_torchscript_model(path, weights_pending);
}

std::vector<MemoryRow> memory_rows(const ModelSizes& s, const std::vector<std::string>& dtypes) {
  std::vector<MemoryRow> rows;
  for (const auto& dtype : dtypes) {
    const double b = bytes_per_element(dtype);
    MemoryRow r;
    r.dtype = dtype;
    r.largest_layer = static_cast<double>(s.largest_layer_elements) * b;
    r.weights = static_cast<double>(s.parameters + s.buffers) * b;
    if (dtype.rfind("int", 0) != 0) {  // integer weights are for inference only
      r.gradients = static_cast<double>(s.trainable) * b;
      r.adam = 2 * static_cast<double>(s.trainable) * b;
      r.training = r.weights + r.gradients + r.adam;
    }
    rows.push_back(r);
  }
  return rows;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char text[64];
  if (u > 0) {
    std::snprintf(text, sizeof text, "%.2f %s", bytes, units[u]);
    return text;
  }
  // Whole bytes, or an int4 size's half byte (Accelerate's round(size, 2)), without trailing zeros.
  std::snprintf(text, sizeof text, "%.2f", bytes);
  std::string number = text;
  number.erase(number.find_last_not_of('0') + 1);
  if (number.back() == '.') number.pop_back();
  return number + " bytes";
}

std::string memory_table(const std::string& title, const ModelSizes& s, const std::vector<MemoryRow>& rows) {
  const std::vector<std::string> header = {"dtype", "largest layer", "weights", "gradients", "Adam states",
                                           "training with Adam"};
  std::vector<std::vector<std::string>> cells = {header};
  auto size = [](double v) { return v < 0 ? std::string("-") : format_bytes(v); };
  for (const auto& r : rows)
    cells.push_back({r.dtype, size(r.largest_layer), size(r.weights), size(r.gradients), size(r.adam), size(r.training)});
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::ostringstream out;
  out << "Memory usage for " << title << "\n"
      << with_commas(s.parameters) << " parameters (" << with_commas(s.trainable) << " trainable), "
      << with_commas(s.buffers) << " buffer elements; largest layer: " << (s.largest_layer.empty() ? "-" : s.largest_layer)
      << "\n\n";
  auto rule = [&]() {
    for (size_t i = 0; i < width.size(); ++i) out << (i ? "+" : "") << std::string(width[i] + 2, '-');
    out << "\n";
  };
  for (size_t r = 0; r < cells.size(); ++r) {
    for (size_t i = 0; i < cells[r].size(); ++i) {
      const std::string& c = cells[r][i];
      out << (i ? "| " : " ") << (i == 0 ? c + std::string(width[i] - c.size(), ' ')
                                         : std::string(width[i] - c.size(), ' ') + c)
          << " ";
    }
    out << "\n";
    if (r == 0) rule();
  }
  out << "\nActivations are not included: they grow with the batch. Mixed precision (fp16, bf16) keeps\n"
         "float32 weights, gradients and Adam states: read the float32 row for it.\n";
  return out.str();
}

std::string memory_json(const ModelSizes& s, const std::vector<MemoryRow>& rows) {
  nlohmann::json j;
  j["parameters"] = s.parameters;
  j["trainable_parameters"] = s.trainable;
  j["buffer_elements"] = s.buffers;
  j["largest_layer"] = s.largest_layer;
  j["rows"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json row = {{"dtype", r.dtype}, {"largest_layer_bytes", r.largest_layer}, {"weights_bytes", r.weights}};
    if (r.training >= 0) {
      row["gradients_bytes"] = r.gradients;
      row["adam_bytes"] = r.adam;
      row["training_bytes"] = r.training;
    }
    j["rows"].push_back(row);
  }
  return j.dump(2);
}

}  // namespace acc

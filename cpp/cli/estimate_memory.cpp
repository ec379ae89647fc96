#include "cli/estimate_memory.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

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

// The layer a tensor belongs to: its name's first `depth` components.
std::string layer_of(const std::string& name, int depth) {
  size_t end = 0;
  for (int i = 0; i < depth; ++i) {
    end = name.find('.', i == 0 ? 0 : end + 1);
    if (end == std::string::npos) return name;
  }
  return name.substr(0, end);
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
  for (const auto& [name, t] : model.named_buffers()) {
    s.buffers += t.numel();
    tensors.emplace_back(name, t.numel());
  }
  // Group by the first name component; below a single wrapper (e.g. "net."), by the next one.
  std::map<std::string, int64_t> layers;
  for (int depth = 1; depth <= 4; ++depth) {
    layers.clear();
    for (const auto& [name, n] : tensors) layers[layer_of(name, depth)] += n;
    if (layers.size() > 1) break;
  }
  for (const auto& [name, n] : layers)
    if (n > s.largest_layer_elements) s.largest_layer = name, s.largest_layer_elements = n;
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
  if (u == 0) std::snprintf(text, sizeof text, "%.0f bytes", bytes);
  else std::snprintf(text, sizeof text, "%.2f %s", bytes, units[u]);
  return text;
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

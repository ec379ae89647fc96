#include "tracking/wandb_values.h"

#include <cmath>

#include "common/python_text.h"

namespace acc::tracking::wandb {
namespace {

void write_json(const nlohmann::ordered_json& value, std::string& out) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = value.get<double>();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d > 0 ? "Infinity" : "-Infinity";
      else
        out += python_float_repr(d);
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += ',';
        first = false;
        write_json(item, out);
      }
      out += ']';
      return;
    }
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& item : value.items()) {
        if (!first) out += ',';
        first = false;
        out += nlohmann::ordered_json(item.key()).dump();
        out += ':';
        write_json(item.value(), out);
      }
      out += '}';
      return;
    }
    default:  // null, booleans, integers, strings (escaped, UTF-8 kept)
      out += value.dump();
  }
}

void collect(const nlohmann::ordered_json& tree, std::vector<std::string>& path, std::vector<Leaf>& out) {
  for (const auto& item : tree.items()) {
    path.push_back(item.key());
    if (item.value().is_object())
      collect(item.value(), path, out);
    else
      out.push_back(Leaf{path, value_json(item.value())});
    path.pop_back();
  }
}

// wandb's make_file_path_upload_safe.
std::string upload_safe(const std::string& key) {
  const size_t start = key.find_first_not_of('/');
  if (start == std::string::npos) return "";
  std::string safe;
  for (size_t begin = start;;) {
    const size_t slash = key.find('/', begin);
    std::string part = key.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
    if (part == ".") part = "_";
    if (part == "..") part = "__";
    safe += part;
    if (slash == std::string::npos) return safe;
    safe += '/';
    begin = slash + 1;
  }
}

}  // namespace

std::string value_json(const nlohmann::ordered_json& value) {
  std::string out;
  write_json(value, out);
  return out;
}

std::vector<Leaf> leaves(const nlohmann::ordered_json& tree) {
  std::vector<Leaf> out;
  std::vector<std::string> path;
  collect(tree, path, out);
  return out;
}

std::string media_path(const std::string& folder, const std::string& key, int64_t step, const std::string& sha256,
                       const std::string& extension) {
  return folder + "/" + upload_safe(key) + "_" + std::to_string(step) + "_" + sha256.substr(0, 20) + extension;
}

nlohmann::ordered_json image_list_value(int64_t width, int64_t height, const std::vector<std::string>& paths) {
  return {{"_type", "images/separated"}, {"width", width},    {"height", height}, {"format", "png"},
          {"count", paths.size()},       {"filenames", paths}};
}

nlohmann::ordered_json histogram_value(const Histogram& histogram) {
  const NumpyHistogram numpy = numpy_histogram(histogram);
  return {{"_type", "histogram"}, {"values", numpy.counts}, {"bins", numpy.edges}};
}

}  // namespace acc::tracking::wandb

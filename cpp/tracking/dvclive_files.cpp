#include "tracking/dvclive_files.h"

#include <cmath>

#include "common/error.h"
#include "common/files.h"
#include "common/python_json.h"
#include "common/python_text.h"

namespace acc::tracking::dvclive {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxReadBytes = size_t{16} << 20;  // a params.yaml, metrics.json or dvc.yaml read back

}  // namespace

std::vector<std::string> parts_of(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
    parts.push_back(name.substr(start, slash - start));
  parts.push_back(name.substr(start));
  return parts;
}

std::string tsv_field(const std::string& text) {
  if (text.find_first_of("\t\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string relative_to(const fs::path& path, const fs::path& base) {
  return path.lexically_normal().lexically_relative(base.lexically_normal()).generic_string();
}

std::optional<std::string> read_small_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  refuse_unless_regular(path.string());
  if (fs::file_size(path, ec) > kMaxReadBytes)
    fail(Status::InvalidArgument, "dvclive: ", path.string(), " is larger than ", kMaxReadBytes, " bytes");
  auto text = read_whole_file(path.string());
  if (!text) fail(Status::Io, "dvclive: cannot read ", path.string());
  return text;
}

YAML::Node read_yaml(const fs::path& path, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(Status::InvalidArgument, "dvclive: ", path.string(), " is not YAML: ", e.what());
  }
}

void check_dvc_file(const fs::path& dvc_file, const fs::path& dir) {
  const auto text = read_small_file(dvc_file);
  if (!text) return;
  const YAML::Node root = read_yaml(dvc_file, *text);
  if (root.IsNull()) return;
  const std::string ours = relative_to(dir, dvc_file.parent_path()) + "/";
  // A path DVCLive wrote for `dir` (DVCLive's own test: the folder's relative path in it; for a
  // dvc.yaml inside the folder itself, its files' paths).
  auto names_ours = [&](const std::string& path) {
    if (ours != "./") return path.find(ours) != std::string::npos;
    return path == "params.yaml" || path == "metrics.json" || path.rfind("plots/", 0) == 0;
  };
  auto is_ours = [&](const YAML::Node& entry) {
    if (entry.IsScalar()) return names_ours(entry.Scalar());
    if (entry.IsMap() && entry.size() == 1) {
      const YAML::Node key = entry.begin()->first;
      return key.IsScalar() && names_ours(key.Scalar());
    }
    return false;
  };
  bool only_ours = root.IsMap();
  if (only_ours)
    for (const auto& kv : root) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (key == "params" || key == "metrics" || key == "plots") {
        if (!kv.second.IsSequence()) only_ours = false;
        for (const auto& entry : kv.second) only_ours = only_ours && is_ours(entry);
      } else if (key == "artifacts" && kv.second.IsMap()) {
        for (const auto& artifact : kv.second) {
          const YAML::Node path = artifact.second["path"];
          only_ours = only_ours && path && path.IsScalar() && names_ours(path.Scalar());
        }
      } else {
        only_ours = false;
      }
    }
  if (!only_ours)
    fail(Status::Unsupported, "dvclive: ", dvc_file.string(),
         " holds entries of its own (stages, other plots); adding ",
         "DVCLive's to it is not built (DVCLive merges them through DVC's YAML round trip, which keeps its comments): ",
         "give init_kwargs {\"dvclive\": {\"dvcyaml\": \"", (dir / "dvc.yaml").generic_string(), "\"}} or false");
}

void collect_names(const nlohmann::ordered_json& node, const std::string& prefix,
                   std::unordered_set<std::string>& values, std::unordered_set<std::string>& groups) {
  for (const auto& [key, value] : node.items()) {
    const std::string name = prefix.empty() ? key : prefix + "/" + key;
    if (prefix.empty() && key == "step") continue;
    if (value.is_object()) {
      groups.insert(name);
      collect_names(value, name, values, groups);
    } else {
      values.insert(name);
    }
  }
}

void RunFiles::set(const std::string& name, nlohmann::ordered_json value) {
  nlohmann::ordered_json* node = &summary;
  const std::vector<std::string> parts = parts_of(name);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    node = &(*node)[parts[i]];
    if (!node->is_object()) *node = nlohmann::ordered_json::object();
  }
  (*node)[parts.back()] = std::move(value);
}

void RunFiles::apply(const Record& r, int64_t step) {
  for (size_t i = 0; i < r.names.size(); ++i) {
    // Live.log_metric keeps NaN and infinities as str(val): "nan", "inf", "-inf" (strict JSON).
    const double v = r.values[i];
    set(r.names[i], std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(python_float_repr(v)));
  }
  for (size_t i = 0; i < r.text_names.size(); ++i) set(r.text_names[i], r.texts[i]);
  summary["step"] = step;  // Live.make_summary, at each next_step
  logged = summary_changed = true;
}

std::string RunFiles::dvcyaml() const {
  const fs::path base = dvc_file.parent_path();
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (has_params)
    out << YAML::Key << "params" << YAML::Value << YAML::BeginSeq << relative_to(dir / "params.yaml", base)
        << YAML::EndSeq;
  if (!summary.empty())
    out << YAML::Key << "metrics" << YAML::Value << YAML::BeginSeq << relative_to(dir / "metrics.json", base)
        << YAML::EndSeq;
  std::error_code ec;
  if (fs::is_directory(dir / "plots" / "metrics", ec))
    out << YAML::Key << "plots" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
        << relative_to(dir / "plots" / "metrics", base) << YAML::Value << YAML::BeginMap << YAML::Key << "x"
        << YAML::Value << "step" << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void RunFiles::write_out() {
  if (summary_changed || final) {
    write_file_atomically((dir / "metrics.json").string(), python_json_dump(summary, 4) + "\n");
    summary_changed = false;
  }
  if (!dvc_file.empty() && (logged || final)) {
    std::string text = dvcyaml();
    if (text != dvcyaml_written) {
      make_folders(dvc_file.parent_path().string(), "the folder of dvc.yaml");
      write_file_atomically(dvc_file.string(), text);
      dvcyaml_written = std::move(text);
    }
  }
}

}  // namespace acc::tracking::dvclive

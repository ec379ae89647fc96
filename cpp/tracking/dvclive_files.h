// DVCLive's files, as dvclive.Live writes and reads them (tracking/dvclive_tracker.h writes them):
// the names of metrics as paths, the tables' fields, the summary (metrics.json), dvc.yaml, and what a
// run resuming or sharing a dvc.yaml reads back.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "tracking/tracker.h"

namespace acc::tracking::dvclive {

// A metric's name split at its '/' (the folders of its table, the nesting of metrics.json).
std::vector<std::string> parts_of(const std::string& name);
// A field as Python's csv module writes it with the tab as delimiter (QUOTE_MINIMAL).
std::string tsv_field(const std::string& text);
// os.path.relpath of two absolute paths, with '/' (what dvc.yaml holds).
std::string relative_to(const std::filesystem::path& path, const std::filesystem::path& base);
// A file DVCLive wrote, read back whole; nullopt where it is not there. Io for what is not a regular
// file, InvalidArgument past 16 MiB.
std::optional<std::string> read_small_file(const std::filesystem::path& path);
// `text` parsed; InvalidArgument naming `path` where it is not YAML.
YAML::Node read_yaml(const std::filesystem::path& path, const std::string& text);
// Fails (Unsupported) when an existing dvc.yaml holds anything but DVCLive's entries for `dir`:
// DVCLive merges its entries into such a file through DVC's YAML round trip, which keeps the
// comments and the layout that a rewrite here would lose.
void check_dvc_file(const std::filesystem::path& dvc_file, const std::filesystem::path& dir);
// The names of a summary read back (metrics.json) that hold values, and the groups above them.
void collect_names(const nlohmann::ordered_json& summary, const std::string& prefix,
                   std::unordered_set<std::string>& values, std::unordered_set<std::string>& groups);

// The writer thread's side of a run: the summary that metrics.json holds, and dvc.yaml.
struct RunFiles {
  std::filesystem::path dir, dvc_file;  // dvc_file empty: none
  nlohmann::ordered_json summary = nlohmann::ordered_json::object();
  bool has_params = false;
  bool logged = false;           // a record came: dvc.yaml is written from then on, as Live's next_step writes it
  bool summary_changed = false;  // metrics.json is behind
  bool final = false;            // the run ends: metrics.json and dvc.yaml are written whatever changed
  std::string dvcyaml_written;

  // Live.log_metric's summary: the value at the name's parts (a value replaces a group there).
  void set(const std::string& name, nlohmann::ordered_json value);
  // A log call: its values, and "step" (Live.make_summary at each next_step).
  void apply(const Record& record, int64_t step);
  // What dvc.yaml holds now.
  std::string dvcyaml() const;
  // metrics.json and dvc.yaml where they changed (or at the end), each through a temporary (a reader
  // polling them never sees half a file).
  void write_out();
};

}  // namespace acc::tracking::dvclive
